#!/bin/bash
# The tail latency of sluice serve's gRPC door beside nghttpd (nghttp2's
# own HTTP/2 server, the floor of an HTTP/2 exchange) at the same rate
# with the same h2load options, in one run.
#
#   bench/grpc_vs_nghttpd.sh                 # 3 rounds of 10 s, a quarter of peak
#   ROUNDS=5 DUR=10 FRAC=25 C=16 bench/grpc_vs_nghttpd.sh [SLUICE...]
#
# Servers, each on CPU $SRV_CPU (every thread of the process):
#   sluice       `sluice serve --threads 1 --grpc-listen`: ShouldRateLimit
#                of bench/lib.sh's request, a limit no run reaches
#   nghttpd      `nghttpd --no-tls` (Debian's nghttp2-server, installed
#                when missing) answering GET of a 1-byte file
#   nghttpd-grpc the same nghttpd answering the gRPC call's own frames:
#                the request's HEADERS and DATA (h2load -d, the same
#                body and path), a 1-byte file and a trailer (`--trailer
#                'grpc-status: 0'`), so that h2load does the same work
#                for both and only the servers differ
# Load on CPU $CLI_CPU:
#   peak   h2load -t1 -c4 -m100 -D$DUR against sluice, three times: the
#          median of the calls it answered a second (the batched peak)
#   paced  h2load -t1 -c$C -m100 --rps=R/$C -D$DUR at R = peak*FRAC/100,
#          against each server in turn, round after round; p50, p99 and
#          p99.9 of the request times h2load logs (--log-file), and the
#          server's CPU (user + system, /proc) per request
# Several SLUICE binaries (default: build/sluice) are measured in the
# same rounds, before and after a change.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}"
source "$PEERS_DIR/common.sh" # wait_port, stop_pid, SRV_CPU/CLI_CPU
source "$HERE/lib.sh"         # ports_free, grpc_bench_files

ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-10}"
FRAC="${FRAC:-25}"
C="${C:-16}"
PORT="${PORT:-18360}"
NPORT=$((PORT + 9))
[ $# -gt 0 ] || set -- "$ROOT/build/sluice"
OUT=$(mktemp -d)
trap 'for p in $(jobs -p); do kill $p 2>/dev/null; done; rm -rf "$OUT"' EXIT
RLS=/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit

command -v h2load >/dev/null || { echo "h2load is missing (scripts/deps.sh --test)" >&2; exit 1; }
if ! command -v nghttpd >/dev/null && [ ! -x /usr/sbin/nghttpd ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nghttp2-server >/dev/null ||
    { echo "cannot install nghttp2-server" >&2; exit 1; }
fi
NGHTTPD=$(command -v nghttpd || echo /usr/sbin/nghttpd)
ports_free "$PORT" "$NPORT"
grpc_bench_files "$OUT"
mkdir -p "$OUT/www$(dirname "$RLS")" && printf x >"$OUT/www/x" && printf x >"$OUT/www$RLS"

# One server per binary, each on ports of its own; nghttpd beside them.
gports=()
spids=()
i=0
for bin in "$@"; do
  p=$((PORT + 2 * i))
  taskset -c "$SRV_CPU" "$bin" serve --rules "$OUT/rules.yaml" --threads 1 \
    --listen "127.0.0.1:$p" --grpc-listen "127.0.0.1:$((p + 1))" 2>"$OUT/sluice$i.log" &
  spids+=("$!")
  wait_port "$((p + 1))" || { echo "$bin did not start" >&2; exit 1; }
  gports+=("$((p + 1))")
  i=$((i + 1))
done
taskset -c "$SRV_CPU" "$NGHTTPD" --no-tls -d "$OUT/www" "$NPORT" >/dev/null 2>&1 &
npid=$!
taskset -c "$SRV_CPU" "$NGHTTPD" --no-tls --trailer 'grpc-status: 0' -d "$OUT/www" \
  "$((NPORT - 1))" >/dev/null 2>&1 &
tpid=$!
wait_port "$NPORT" && wait_port "$((NPORT - 1))" || { echo "nghttpd did not start" >&2; exit 1; }
for pid in "${spids[@]}"; do # the process's other threads on its CPU too
  for t in /proc/"$pid"/task/*; do taskset -p -c "$SRV_CPU" "${t##*/}" >/dev/null; done
done

grpc_h2load() { # PORT EXTRA...: h2load of ShouldRateLimit calls
  local port=$1; shift
  taskset -c "$CLI_CPU" h2load -t1 -d "$OUT/req.bin" -H 'content-type: application/grpc' \
    -H 'te: trailers' "$@" "http://127.0.0.1:$port$RLS"
}
percentiles() { # LOG TICKS: "p50 p99 p999 requests cpu_us_per_request"
  python3 - "$1" "$2" <<'P'
import os, sys
t = sorted(int(l.split("\t")[2]) for l in open(sys.argv[1]) if l.strip())
q = lambda f: t[min(len(t) - 1, int(f * len(t)))] / 1000.0
us = int(sys.argv[2]) * 1e6 / os.sysconf("SC_CLK_TCK") / max(1, len(t))
print("%.3f %.3f %.3f %d %.2f" % (q(0.50), q(0.99), q(0.999), len(t), us))
P
}
paced() { # NAME PID RUN...: one paced run of RUN, its line printed
  local name=$1 pid=$2 t0
  shift 2
  rm -f "$OUT/log" # h2load appends
  t0=$(cpu_ticks "$pid")
  "$@" -c"$C" -m100 --rps="$per" -D "$DUR" --log-file="$OUT/log" >"$OUT/h2" 2>&1
  printf '%-6s %-36s %9s %9s %9s %9s %9s %s\n' "$r" "$name" \
    $(percentiles "$OUT/log" $(($(cpu_ticks "$pid") - t0))) \
    "$(grep -q '^status codes: [0-9]* 2xx, 0 3xx, 0 4xx, 0 5xx' "$OUT/h2" || echo '(not all 2xx!)')"
}

peak=$(for k in 1 2 3; do
  grpc_h2load "${gports[0]}" -c4 -m100 -D "$DUR" | awk '/^finished in/ {print int($4)}'
done | sort -n | sed -n 2p)
rate=$((peak * FRAC / 100))
per=$((rate / C))
echo "peak (h2load -c4 -m100, $1): $peak calls/s; paced: $rate/s (--rps $per on $C connections)"
printf '%-6s %-36s %9s %9s %9s %9s %9s\n' round server p50_ms p99_ms p999_ms requests cpu_us
for r in $(seq "$ROUNDS"); do
  i=0
  for bin in "$@"; do
    paced "$bin" "${spids[$i]}" grpc_h2load "${gports[$i]}"
    i=$((i + 1))
  done
  paced nghttpd "$npid" taskset -c "$CLI_CPU" h2load -t1 "http://127.0.0.1:$NPORT/x"
  paced nghttpd-grpc "$tpid" grpc_h2load "$((NPORT - 1))"
done
