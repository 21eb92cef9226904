#!/bin/bash
# The tail latency of sluice serve's gRPC door beside nghttpd (nghttp2's
# own HTTP/2 server, the floor of an HTTP/2 exchange) at the same rate
# with the same h2load options, in one run.
#
#   bench/grpc_vs_nghttpd.sh                 # 3 rounds of 10 s, a quarter of peak
#   ROUNDS=5 DUR=10 FRAC=25 C=16 bench/grpc_vs_nghttpd.sh [SLUICE...]
#
# Servers, each on CPU $SRV_CPU: `sluice serve --threads 1 --grpc-listen`
# (one call: ShouldRateLimit of bench/lib.sh's request, a limit no run
# reaches) and `nghttpd --no-tls` serving a 1-byte file (installed from
# Debian's nghttp2-server when missing).  Load on CPU $CLI_CPU:
#   peak   h2load -t1 -c4 -m100 -D$DUR against sluice: the calls it
#          answered a second (the batched peak)
#   paced  h2load -t1 -c$C -m100 --rps=R/$C -D$DUR at R = peak*FRAC/100,
#          against each server in turn, round after round; p50, p99 and
#          p99.9 of the request times h2load logs (--log-file)
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
mkdir -p "$OUT/www" && printf x >"$OUT/www/x"

# One server per binary, each on ports of its own; nghttpd beside them.
gports=()
i=0
for bin in "$@"; do
  p=$((PORT + 2 * i))
  taskset -c "$SRV_CPU" "$bin" serve --rules "$OUT/rules.yaml" --threads 1 \
    --listen "127.0.0.1:$p" --grpc-listen "127.0.0.1:$((p + 1))" 2>"$OUT/sluice$i.log" &
  wait_port "$((p + 1))" || { echo "$bin did not start" >&2; exit 1; }
  gports+=("$((p + 1))")
  i=$((i + 1))
done
taskset -c "$SRV_CPU" "$NGHTTPD" --no-tls -d "$OUT/www" "$NPORT" >/dev/null 2>&1 &
wait_port "$NPORT" || { echo "nghttpd did not start" >&2; exit 1; }

grpc_h2load() { # PORT EXTRA...: h2load of ShouldRateLimit calls
  local port=$1; shift
  taskset -c "$CLI_CPU" h2load -t1 -d "$OUT/req.bin" -H 'content-type: application/grpc' \
    -H 'te: trailers' "$@" "http://127.0.0.1:$port$RLS"
}
percentiles() { # LOG: "p50 p99 p999" of its request times, in ms
  python3 - "$1" <<'P'
import sys
t = sorted(int(l.split("\t")[2]) for l in open(sys.argv[1]) if l.strip())
q = lambda f: t[min(len(t) - 1, int(f * len(t)))] / 1000.0
print("%.3f %.3f %.3f %d" % (q(0.50), q(0.99), q(0.999), len(t)))
P
}

peak=$(grpc_h2load "${gports[0]}" -c4 -m100 -D "$DUR" |
  awk '/^finished in/ {sub(",", "", $5); print int($5)}')
rate=$((peak * FRAC / 100))
per=$((rate / C))
echo "peak (h2load -c4 -m100, $1): $peak calls/s; paced: $rate/s (--rps $per on $C connections)"
printf '%-8s %-40s %10s %10s %10s %8s\n' round server p50_ms p99_ms p999_ms requests
for r in $(seq "$ROUNDS"); do
  i=0
  for bin in "$@"; do
    grpc_h2load "${gports[$i]}" -c"$C" -m100 --rps="$per" -D "$DUR" --log-file="$OUT/log" >/dev/null 2>&1
    printf '%-8s %-40s %10s %10s %10s %8s\n' "$r" "$bin" $(percentiles "$OUT/log")
    i=$((i + 1))
  done
  taskset -c "$CLI_CPU" h2load -t1 -c"$C" -m100 --rps="$per" -D "$DUR" --log-file="$OUT/log" \
    "http://127.0.0.1:$NPORT/x" >/dev/null 2>&1
  printf '%-8s %-40s %10s %10s %10s %8s\n' "$r" nghttpd $(percentiles "$OUT/log")
done
