#!/bin/bash
# sluice proxy deciding through Redis (--store redis) vs on its embedded
# memory store, in one run, to the same upstream.
#
#   bench/proxy_redis.sh                # 3 alternating rounds, 10 s runs
#   ROUNDS=5 DUR=20s bench/proxy_redis.sh
#
# Layout (2 cores): redis-server and the upstream (a private nginx,
# worker_processes 1, `return 200 "ok"`) on CPU 0; the proxy under test
# (--threads 1) and wrk (-t1 -c$CONNS, keep-alive) on CPU 1.  Two proxies
# with the same routes and rules (bench/proxy_rules/), one per store; the
# Redis one waits on Redis for every decision (one EVALSHA, pipelined on
# its one connection), with --redis-timeout 50ms.
# Cases:
#   keys     a random X-Api-Key of 100k per request, all allowed
#            (token_bucket 1000/s burst 1000), the peer's wrk/keys.lua
#   limited  one client address, gcra 10/s: nearly every request gets 429
# Output: one line per run, "store case rps=... p99_ms=... non2xx=...",
# then medians; raw wrk output in bench/results/proxy_redis_<UTC time>/.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}" # the peers, beside the repository
ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-10s}"
CONNS="${CONNS:-50}"
PORT="${PORT:-18400}" # memory proxy; PORT+1 redis proxy, +2 upstream, +3 redis
SLUICE="${SLUICE:-$ROOT/build/sluice}"
UP=$((PORT + 2))
RPORT=$((PORT + 3))
OUT="$ROOT/bench/results/proxy_redis_$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
export PATH="$PATH:/usr/sbin"
source "$HERE/lib.sh"
command -v wrk >/dev/null && command -v nginx >/dev/null &&
  command -v redis-server >/dev/null ||
  { echo "needs wrk, nginx and redis-server" >&2; exit 1; }
ports_free "$PORT" "$RPORT"
chmod 755 "$OUT"
upstream_conf "$OUT/up" "$UP"
cat >"$OUT/proxy.yaml" <<Y
rules: $HERE/proxy_rules
threads: 1
upstream: http://127.0.0.1:$UP
metrics_path: /sluice/metrics   # read below (off by default)
routes:
  - {prefix: /limited, domain: limited, descriptors: [[{remote_address: {}}]]}
  - {prefix: /keys, domain: keys, descriptors: [[{request_header: {name: X-Api-Key, key: api_key}}]]}
Y

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
taskset -c 0 redis-server --port "$RPORT" --bind 127.0.0.1 --save "" \
  --appendonly no >"$OUT/redis.log" 2>&1 &
PIDS+=($!)
taskset -c 0 nginx -p "$OUT/up/" -c "$OUT/up/nginx.conf" -e "$OUT/up/error.log" \
  >"$OUT/up/stdout.log" 2>&1 &
PIDS+=($!)
taskset -c 1 "$SLUICE" proxy --config "$OUT/proxy.yaml" --listen "127.0.0.1:$PORT" \
  2>"$OUT/memory.log" &
PIDS+=($!)
taskset -c 1 "$SLUICE" proxy --config "$OUT/proxy.yaml" --listen "127.0.0.1:$((PORT + 1))" \
  --store "redis://127.0.0.1:$RPORT" --redis-timeout 50ms 2>"$OUT/redis_proxy.log" &
PIDS+=($!)
for _ in $(seq 100); do
  curl -s "http://127.0.0.1:$((PORT + 1))/sluice/metrics" | grep -q '^sluice_store_up 1' &&
    curl -fs -o /dev/null "http://127.0.0.1:$PORT/keys" && break
  sleep 0.1
done

{
  echo "# sluice: $(git -C "$ROOT" rev-parse --short HEAD), binary $SLUICE"
  echo "# date: $(date -u +%FT%TZ); $(nproc) CPUs; rounds $ROUNDS, DUR $DUR, conns $CONNS"
} | tee "$OUT/meta.txt"

run() { # run STORE CASE ROUND
  local port=$PORT url extra=()
  [ "$1" = redis ] && port=$((PORT + 1))
  url="http://127.0.0.1:$port/$2"
  [ "$2" = keys ] && extra=(-s "$PEERS_DIR/wrk/keys.lua")
  redis-cli -p "$RPORT" FLUSHALL >/dev/null
  taskset -c 1 wrk -t1 -c"$CONNS" -d"$DUR" --latency "${extra[@]}" "$url" \
    >"$OUT/$1_$2_$3.txt" 2>&1
  python3 - "$OUT/$1_$2_$3.txt" "$1" "$2" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def ms(v):
    m = re.match(r'([\d.]+)(us|ms|s)$', v)
    return float(m.group(1)) * {'us': 1e-3, 'ms': 1, 's': 1e3}[m.group(2)]
n = int(re.search(r'(\d+) requests in', t).group(1))
non2xx = int((re.search(r'Non-2xx or 3xx responses: (\d+)', t) or [0, 0])[1])
print("%s %s rps=%s p99_ms=%.2f non2xx=%.3f" % (
    sys.argv[2], sys.argv[3], re.search(r'Requests/sec:\s+([\d.]+)', t).group(1),
    ms(re.search(r'^\s+99%\s+(\S+)', t, re.M).group(1)), non2xx / n))
PY
}

for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="memory redis"; else order="redis memory"; fi
  for c in keys limited; do
    for s in $order; do run "$s" "$c" "$r"; done
  done
done | tee "$OUT/summary.txt"
echo "median:"
for s in memory redis; do
  for c in keys limited; do
    rps=$(grep "^$s $c " "$OUT/summary.txt" | sed 's/.* rps=\([0-9.]*\).*/\1/' | sort -g)
    p99=$(grep "^$s $c " "$OUT/summary.txt" | sed 's/.*p99_ms=\([0-9.]*\).*/\1/' | sort -g)
    n=$(echo "$rps" | wc -l); m=$(( (n + 1) / 2 ))
    echo "$s $c rps=$(echo "$rps" | sed -n "${m}p") p99_ms=$(echo "$p99" | sed -n "${m}p") (median of $n)"
  done
done | tee -a "$OUT/summary.txt"
curl -s "http://127.0.0.1:$((PORT + 1))/sluice/metrics" |
  grep -E '^sluice_store_(up|failures)' | tee -a "$OUT/summary.txt"
