#!/bin/bash
# sluice proxy vs nginx limit_req as rate-limiting reverse proxies, in one
# run, to the same upstream.
#
#   bench/proxy_vs_nginx.sh            # 3 alternating rounds, 10 s runs
#   ROUNDS=5 DUR=20s bench/proxy_vs_nginx.sh
#   ONLY=limited bench/proxy_vs_nginx.sh  # some of the cases
#
# Two private nginx instances are started from the configs written below
# (modelled on the peer setup in $PEERS_DIR/nginx/, on ports of
# their own so that they never meet another session's nginx), each
# worker_processes 1 on CPU 0: the upstream, a `return 200 "ok"` server
# (127.0.0.1:$UP), the same for both proxies; and nginx the proxy.  The
# upstream is its own process for both proxies: served from the proxy
# nginx's own worker (as this script did until 2026-11-23), nginx's
# proxied requests never left its process while sluice's took a context
# switch each way.  Proxies (both on CPU 0, one worker / one
# event-loop thread, 64 idle keep-alive upstream connections):
#   nginx:  proxy_pass with limit_req, keep-alive upstream (HTTP/1.1)
#   sluice: build-bench/sluice proxy --threads 1 --upstream
#           http://127.0.0.1:$UP with the config written below and the
#           rules in bench/proxy_rules/
# Cases (wrk -t1 -c$CONNS keep-alive, pinned to CPU 1):
#   allowed  one client address, a limit that never bites
#            (nginx zone ip_hi 1M r/s; sluice /all: remote_address,
#            token_bucket 1M/s)
#   limited  one client address, 10 r/s: nearly every request gets 429
#            (nginx zone ip_lo 10r/s, no burst; sluice /limited:
#            remote_address, gcra 10/s, no burst)
#   keys     a random X-Api-Key of 100k per request, all allowed
#            (nginx zone key_hi 1000r/s burst 1000 nodelay; sluice
#            /keys: request_header X-Api-Key, token_bucket 1000/s burst
#            1000), the peer's wrk/keys.lua
# sluice adds its rate-limit headers to every answer (nginx adds none);
# the server CPU is the proxy's and the upstream's together.
# Raw wrk output: bench/results/proxy_vs_nginx_<UTC time>/ (not committed).
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}" # the peers, beside the repository
source "$PEERS_DIR/common.sh" # wait_port, stop_pid, cpu_ticks, wait_quiet, SRV_CPU/CLI_CPU
source "$HERE/lib.sh"

ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-10s}"
CONNS="${CONNS:-50}"
ONLY="${ONLY:-allowed limited keys}" # the cases to run
PORT="${PORT:-18300}" # sluice; nginx: PORT+1 .. PORT+4
UP=$((PORT + 1))
QUIET_MAX="${QUIET_MAX:-30}"; export QUIET_MAX
BUILD="${BUILD:-$ROOT/build-bench}"
SLUICE="$BUILD/sluice"
KEYS_LUA="$PEERS_DIR/wrk/keys.lua"
OUT="$ROOT/bench/results/proxy_vs_nginx_$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
export PATH="$PATH:/usr/sbin"
command -v wrk >/dev/null && command -v nginx >/dev/null ||
  { echo "needs wrk and nginx ($PEERS_DIR/setup.sh)" >&2; exit 1; }
if [ ! -x "$SLUICE" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD" -j2 --target sluice >>"$OUT/build.log" 2>&1 ||
    { echo "build failed (see $OUT/build.log)" >&2; exit 1; }
fi

# --- sluice's config: one route per case ------------------------------------
proxy_yaml "$OUT/proxy.yaml" "$PORT" "$UP"

N="$OUT/nginx"
U="$OUT/upstream"
chmod 755 "$OUT"
upstream_conf "$U" "$UP" "worker_cpu_affinity 01;"
nginx_dir "$N"
{
  nginx_head "worker_cpu_affinity 01;"
  limit_req_http "$UP"
  cat <<Y
    server { listen 127.0.0.1:$((PORT + 2)); location / { limit_req zone=ip_hi burst=1000000 nodelay; proxy_pass http://backend; } }
    server { listen 127.0.0.1:$((PORT + 3)); location / { limit_req zone=ip_lo; proxy_pass http://backend; } }
    server { listen 127.0.0.1:$((PORT + 4)); location / { limit_req zone=key_hi burst=1000 nodelay; proxy_pass http://backend; } }
}
Y
} >"$N/nginx.conf"
ports_free "$PORT" $((PORT + 4))
SPID=""; NPID=""; UPID=""
cleanup() { stop_pid "$SPID"; stop_pid "$NPID" QUIT; stop_pid "$UPID" QUIT; }
trap cleanup EXIT
trap 'exit 130' INT TERM
taskset -c "$SRV_CPU" nginx -p "$U/" -c "$U/nginx.conf" -e "$U/error.log" >"$U/stdout.log" 2>&1 &
UPID=$!
wait_port "$UP" && sleep 0.3 && kill -0 "$UPID" 2>/dev/null ||
  { echo "the upstream nginx did not start (see $U/)" >&2; exit 1; }
UPIDS="$UPID $(pgrep -P "$UPID" | tr '\n' ' ')"
taskset -c "$SRV_CPU" nginx -p "$N/" -c "$N/nginx.conf" -e "$N/error.log" >"$N/stdout.log" 2>&1 &
NPID=$!
wait_port $((PORT + 4)) && sleep 0.3 && kill -0 "$NPID" 2>/dev/null ||
  { echo "nginx did not start (see $N/)" >&2; exit 1; }
NPIDS="$NPID $(pgrep -P "$NPID" | tr '\n' ' ')"
taskset -c "$SRV_CPU" "$SLUICE" proxy --config "$OUT/proxy.yaml" 2>"$OUT/sluice.log" &
SPID=$!
wait_port "$PORT" && sleep 0.3 && kill -0 "$SPID" 2>/dev/null ||
  { echo "sluice did not start (see $OUT/sluice.log)" >&2; exit 1; }
curl -fsS -o /dev/null "http://127.0.0.1:$PORT/all" || { echo "sluice proxy failed" >&2; exit 1; }

# case | sluice URL | nginx URL | wrk args
CASES=(
  "allowed|http://127.0.0.1:$PORT/all|http://127.0.0.1:$((PORT + 2))/|"
  "limited|http://127.0.0.1:$PORT/limited|http://127.0.0.1:$((PORT + 3))/|"
  "keys|http://127.0.0.1:$PORT/keys|http://127.0.0.1:$((PORT + 4))/|-s $KEYS_LUA"
)
{
  echo "# sluice: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src tools || echo ', with uncommitted changes'), binary $SLUICE"
  echo "# date: $(date -u +%FT%TZ)"
  echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "# nginx: $(nginx -v 2>&1 | sed 's/.*: //'); wrk: $(wrk -v 2>&1 | head -1)"
  echo "# rounds $ROUNDS, DUR $DUR, conns $CONNS"
} | tee "$OUT/meta.txt"

run() { # run OUTFILE PIDS URL [wrk args]
  local out=$1 pids=$2 url=$3; shift 3
  local t0 t1 w0 w1
  { echo "# cmd: taskset -c $CLI_CPU wrk -t1 -c$CONNS -d$DUR --latency $* $url"; wait_quiet; } >"$out"
  t0=$(cpu_ticks $pids); w0=$(date +%s%N)
  timeout 120 taskset -c "$CLI_CPU" wrk -t1 -c"$CONNS" -d"$DUR" --latency "$@" "$url" >>"$out" 2>&1
  t1=$(cpu_ticks $pids); w1=$(date +%s%N)
  echo "# server_ticks: $((t1 - t0))" >>"$out"
}

for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then order="sluice nginx"; else order="nginx sluice"; fi
  for c in "${CASES[@]}"; do
    IFS='|' read -r name surl nurl extra <<<"$c"
    [[ " $ONLY " == *" $name "* ]] || continue
    for s in $order; do
      if [ "$s" = sluice ]; then
        run "$OUT/${name}_sluice_$r.txt" "$SPID $UPIDS" "$surl" $extra
      else
        run "$OUT/${name}_nginx_$r.txt" "$NPIDS $UPIDS" "$nurl" $extra
      fi
      echo "round $r $name $s: $(awk '/^Requests\/sec:/ {print $2}' "$OUT/${name}_${s}_$r.txt") req/s"
    done
  done
done

python3 - "$OUT" "$ROUNDS" "$ONLY" <<'PY' | tee "$OUT/summary.md"
import re, sys, statistics as st
out, rounds = sys.argv[1], int(sys.argv[2])
def us(v):
    m = re.match(r'([\d.]+)(us|ms|s)$', v)
    return float(m.group(1)) * {'us': 1, 'ms': 1e3, 's': 1e6}[m.group(2)]
def parse(path):
    t = open(path).read()
    n = int(re.search(r'(\d+) requests in', t).group(1))
    return {'rps': float(re.search(r'Requests/sec:\s+([\d.]+)', t).group(1)),
            'p50': us(re.search(r'^\s+50%\s+(\S+)', t, re.M).group(1)),
            'p99': us(re.search(r'^\s+99%\s+(\S+)', t, re.M).group(1)),
            'non2xx': int((re.search(r'Non-2xx or 3xx responses: (\d+)', t) or [0, 0])[1]) / n,
            'cpu_us': int(re.search(r'# server_ticks: (\d+)', t).group(1)) * 1e4 / n}
print("| case | server | req/s | p50 µs | p99 µs | non-2xx | server CPU µs/req | sluice/nginx req/s |")
print("|---|---|---|---|---|---|---|---|")
for case in sys.argv[3].split():
    rows = {s: [parse("%s/%s_%s_%d.txt" % (out, case, s, r)) for r in range(1, rounds + 1)] for s in ("sluice", "nginx")}
    ratio = st.median(a['rps'] / b['rps'] for a, b in zip(rows['sluice'], rows['nginx']))
    for s in ("sluice", "nginx"):
        m = lambda k: st.median(x[k] for x in rows[s])
        print("| %s | %s | %.0f | %.0f | %.0f | %.1f%% | %.1f | %s |" % (case, s, m('rps'), m('p50'), m('p99'),
              100 * m('non2xx'), m('cpu_us'), "%.2f" % ratio if s == "sluice" else ""))
print("\nmedians of %d rounds; ratios taken round by round" % rounds)
for case in sys.argv[3].split():
    p = {s: [parse("%s/%s_%s_%d.txt" % (out, case, s, r))['p99'] for r in range(1, rounds + 1)] for s in ("sluice", "nginx")}
    ratios = [a / b for a, b in zip(p['sluice'], p['nginx'])]
    print("%s p99 by round, µs: sluice %s; nginx %s; sluice lower in %d of %d rounds, median ratio %.2f" % (
        case, " / ".join("%.0f" % x for x in p['sluice']), " / ".join("%.0f" % x for x in p['nginx']),
        sum(q < 1 for q in ratios), rounds, st.median(ratios)))
PY
echo "raw output: $OUT"
