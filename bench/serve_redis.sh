#!/bin/bash
# sluice serve --store redis vs the peer's Redis+Lua token bucket driven
# one call per request by redis-benchmark, in the same run, on one Redis.
#
#   bench/serve_redis.sh       # both layouts, 3 alternating rounds of 10 s
#   ROUNDS=5 DUR=20s bench/serve_redis.sh
#   LAYOUT=client_bound bench/serve_redis.sh   # one layout
#   LAYOUT=redis_bound REDIS_CPU_PCT=50 bench/serve_redis.sh
#
# Two layouts, each a whole run (sluice and the peer on the same Redis):
#   client_bound  Redis has CPU 0 to itself; the clients' side (below) is
#                 what runs out of CPU first.
#   redis_bound   Redis is held to REDIS_CPU_PCT (default 30) of a core by
#                 a cgroup cpu quota (3 ms per 10 ms; needs root), so Redis
#                 is the bottleneck of both runs, as it is when many nodes
#                 share one Redis: decisions/s then measure what each way
#                 costs Redis, not the clients' core.
#
# Layout (this VM has 2 cores): redis-server pinned to CPU 0; the client
# side on CPU 1 — sluice serve (--threads 1) and wrk (-t1) share it in the
# sluice run, redis-benchmark has it alone in the peer run.  So the sluice
# figures include an HTTP server and an HTTP client on one core; the
# peer's include neither (it is Redis's own protocol from a C client).
#   sluice: wrk -t1 -c$CONNS -d$DUR --latency, POST /v1/check of one
#           descriptor, api_key = random of 100k (bench/wrk_check.lua),
#           rule: token_bucket 100/s burst 100 (bench/serve_redis_rules.yaml).
#   peer:   redis-benchmark -c$CONNS -r 100000 -P 1 EVALSHA <token_bucket.lua>
#           1 rl:tb:__rand_int__ 100 100, the peer's script as its run.sh
#           loads it from $PEERS_DIR/redis/ (read at run time, not copied).
# Both: FLUSHALL first; every call is one script call on Redis's clock
# (sluice: FCALL of its library; the peer: EVALSHA).
# Output: one line per run, "name rps=... p99_ms=...", then medians.
set -u
if [ -z "${LAYOUT:-}" ]; then
  LAYOUT=client_bound REDIS_CPU_PCT= "$0" "$@"
  LAYOUT=redis_bound REDIS_CPU_PCT="${REDIS_CPU_PCT:-30}" "$0" "$@"
  exit
fi
[ "$LAYOUT" = redis_bound ] && REDIS_CPU_PCT="${REDIS_CPU_PCT:-30}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}" # the peers, beside the repository
source "$PEERS_DIR/common.sh" # cpu_ticks
ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-10s}"
CONNS="${CONNS:-50}"
RPORT="${RPORT:-16479}"
PORT="${PORT:-18210}"
SLUICE="${SLUICE:-$ROOT/build/sluice}"
N_PEER="${N_PEER:-300000}"
OUT="$ROOT/bench/results/serve_redis_${LAYOUT}_$(date -u +%Y%m%dT%H%M%SZ)"
echo "layout $LAYOUT${REDIS_CPU_PCT:+ (Redis held to $REDIS_CPU_PCT% of a core)}"
mkdir -p "$OUT"
CLI="redis-cli -h 127.0.0.1 -p $RPORT"

taskset -c 0 redis-server --port "$RPORT" --bind 127.0.0.1 --save "" \
  --appendonly no --daemonize no >"$OUT/redis.log" 2>&1 &
RPID=$!
CG=""
if [ -n "${REDIS_CPU_PCT:-}" ]; then
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then # cgroup v2
    CG=/sys/fs/cgroup/sluice_bench_$$
    mkdir "$CG" && echo "$((REDIS_CPU_PCT * 100)) 10000" >"$CG/cpu.max"
  else                                             # cgroup v1
    CG=/sys/fs/cgroup/cpu/sluice_bench_$$
    mkdir "$CG" && echo 10000 >"$CG/cpu.cfs_period_us" &&
      echo "$((REDIS_CPU_PCT * 100))" >"$CG/cpu.cfs_quota_us"
  fi || { echo "REDIS_CPU_PCT needs root and a cgroup cpu controller" >&2; kill $RPID; exit 1; }
  echo "$RPID" >"$CG/cgroup.procs"
fi
taskset -c 1 "$SLUICE" serve --rules "$HERE/serve_redis_rules.yaml" --public-metrics true \
  --listen "127.0.0.1:$PORT" --threads 1 --store "redis://127.0.0.1:$RPORT" \
  --redis-timeout 50ms 2>"$OUT/sluice.log" &
SPID=$!
trap 'kill $SPID $RPID 2>/dev/null; wait 2>/dev/null; [ -n "$CG" ] && rmdir "$CG"' EXIT
for _ in $(seq 100); do
  curl -s "http://127.0.0.1:$PORT/readyz" | grep -q '"store_status":"up"' && break
  sleep 0.1
done
TB=$($CLI SCRIPT LOAD "$(cat "$PEERS_DIR/redis/token_bucket.lua")")

# Redis's own time per script call (INFO commandstats) since the last
# reset: sluice's FCALLs (EVALSHA on a Redis without Functions), the
# peer's EVALSHAs.
usec_per_call() {
  $CLI INFO commandstats | tr -d '\r' |
    sed -n 's/^cmdstat_\(fcall\|evalsha\):.*usec_per_call=\([0-9.]*\).*/\2/p'
}

# Redis's CPU seconds (user + sys) so far, from INFO cpu.
redis_cpu() {
  $CLI INFO cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.3f", s}'
}

# The daemon's store counters: script calls sent, decision calls carried.
store_counter() {
  curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'
}

run_sluice() {
  $CLI FLUSHALL >/dev/null
  $CLI CONFIG RESETSTAT >/dev/null
  local cpu0 cmd0 calls0 t0 w0
  cpu0=$(redis_cpu)
  t0=$(cpu_ticks $SPID)
  cmd0=$(store_counter sluice_store_commands_total)
  calls0=$(store_counter sluice_store_calls_total)
  /usr/bin/time -f "# wrk_cpu_s %U %S" \
    taskset -c 1 wrk -t1 -c"$CONNS" -d"$DUR" --latency -s "$HERE/wrk_check.lua" \
    "http://127.0.0.1:$PORT" >"$OUT/sluice_$1.txt" 2>&1
  local t1
  t1=$(cpu_ticks $SPID)
  local rps p99
  rps=$(awk '/^Requests\/sec/ {print $2}' "$OUT/sluice_$1.txt")
  p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000}
        else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}
        print v}' "$OUT/sluice_$1.txt")
  local n cpu cmds calls
  n=$(awk '/requests in/ {print $1}' "$OUT/sluice_$1.txt")
  cpu=$(awk -v a="$cpu0" -v b="$(redis_cpu)" 'BEGIN {printf "%.3f", b - a}')
  cmds=$(( $(store_counter sluice_store_commands_total) - cmd0 ))
  calls=$(( $(store_counter sluice_store_calls_total) - calls0 ))
  echo "sluice_serve_redis round=$1 rps=$rps p99_ms=$p99" \
    "redis_usec_per_call=$(usec_per_call)" \
    "calls_per_command=$(awk -v a="$calls" -v b="$cmds" 'BEGIN {printf "%.1f", b ? a / b : 0}')" \
    "redis_cpu_us_per_decision=$(awk -v c="$cpu" -v n="$n" 'BEGIN {printf "%.2f", n ? c * 1e6 / n : 0}')" \
    "sluice_cpu_us_per_request=$(awk -v t="$((t1 - t0))" -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", n ? t * 1e6 / hz / n : 0}')" \
    "wrk_cpu_us_per_request=$(awk -v n="$n" '$1 == "#" && $2 == "wrk_cpu_s" {printf "%.2f", ($3 + $4) * 1e6 / n}' "$OUT/sluice_$1.txt")"
}

run_peer() {
  $CLI FLUSHALL >/dev/null
  $CLI CONFIG RESETSTAT >/dev/null
  local cpu0
  cpu0=$(redis_cpu)
  taskset -c 1 redis-benchmark -h 127.0.0.1 -p "$RPORT" -c "$CONNS" -n "$N_PEER" \
    -r 100000 -P 1 --csv EVALSHA "$TB" 1 rl:tb:__rand_int__ 100 100 \
    >"$OUT/peer_$1.txt" 2>&1
  # "rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
  local cpu
  cpu=$(awk -v a="$cpu0" -v b="$(redis_cpu)" 'BEGIN {printf "%.3f", b - a}')
  tail -1 "$OUT/peer_$1.txt" | tr -d '"' |
    awk -F, -v r="$1" -v u="$(usec_per_call)" -v c="$cpu" -v n="$N_PEER" \
      '{printf "peer_redis_lua_token_bucket round=%s rps=%s p99_ms=%s redis_usec_per_call=%s calls_per_command=1.0 redis_cpu_us_per_decision=%.2f\n", r, $2, $7, u, c * 1e6 / n}'
}

for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then run_sluice "$r"; run_peer "$r"; else run_peer "$r"; run_sluice "$r"; fi
done | tee "$OUT/summary.txt"
echo "median:"
for name in sluice_serve_redis peer_redis_lua_token_bucket; do
  rps=$(grep "^$name " "$OUT/summary.txt" | sed 's/.* rps=\([0-9.]*\).*/\1/' | sort -g)
  p99=$(grep "^$name " "$OUT/summary.txt" | sed 's/.*p99_ms=\([0-9.]*\).*/\1/' | sort -g)
  n=$(echo "$rps" | wc -l)
  m=$(( (n + 1) / 2 ))
  echo "$name rps=$(echo "$rps" | sed -n "${m}p") p99_ms=$(echo "$p99" | sed -n "${m}p") (median of $n)"
done | tee -a "$OUT/summary.txt"
curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^sluice_store_(up|failures)' >>"$OUT/summary.txt"
