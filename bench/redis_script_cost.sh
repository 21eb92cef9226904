#!/bin/bash
# bench/redis_script_cost.sh - Redis's own cost per decision: the Redis
# store's script alone and in batches (bench/redis_script_cost.c), and the
# peer's Redis + Lua token bucket ($PEERS_DIR/redis/token_bucket.lua, read
# at run time) driven by redis-benchmark 16 deep, on one throwaway
# redis-server pinned to CPU 0, clients on CPU 1, alternating ROUNDS times.
#
#   bench/redis_script_cost.sh            # N=200000 decisions per run
#   ROUNDS=5 N=400000 bench/redis_script_cost.sh
#
# Per run: Redis's µs per EVALSHA and per decision (INFO commandstats:
# the script's time) and its CPU per decision (INFO cpu: also reading and
# answering commands).  The peer's call has no batches: one per decision.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD:-$ROOT/build-bench}"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}" # the peers, beside the repository
N="${N:-200000}"
ROUNDS="${ROUNDS:-3}"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target redis_script_cost -j"$(nproc)" >/dev/null
source "$ROOT/bench/lib.sh"
throwaway_redis 0
port=$REDIS_PORT
CLI="redis-cli -p $port"
TB=$($CLI SCRIPT LOAD "$(cat "$PEERS_DIR/redis/token_bucket.lua")")

peer() {
  $CLI FLUSHALL >/dev/null
  $CLI CONFIG RESETSTAT >/dev/null
  local cpu0 cpu1 us
  cpu0=$($CLI INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {print s}')
  taskset -c 1 redis-benchmark -p "$port" -c 16 -n "$N" -r 100000 -P 1 -q \
    EVALSHA "$TB" 1 rl:tb:__rand_int__ 100 100 >/dev/null 2>&1
  cpu1=$($CLI INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {print s}')
  us=$($CLI INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p')
  awk -v u="$us" -v a="$cpu0" -v b="$cpu1" -v n="$N" 'BEGIN {
    printf "peer_token_bucket batch=1 usec_per_evalsha=%.2f usec_per_decision=%.2f redis_cpu_us_per_decision=%.2f\n",
      u, u, (b - a) * 1e6 / n }'
}

for r in $(seq "$ROUNDS"); do
  echo "round $r"
  peer
  taskset -c 1 "$BUILD/bench/redis_script_cost" "$port" "$N" 1 10 64
done
redis-server --version
