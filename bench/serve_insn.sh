#!/bin/bash
# bench/serve_insn.sh [BINARY...] - user-space instructions per request of
# `sluice serve` (callgrind: repeatable to a few parts per thousand on this
# VM, which has no hardware counters), for comparing two builds quickly:
#
#   bench/serve_insn.sh build-bench/sluice /path/to/other/sluice
#
# Each binary serves bench/serve_rules.yaml on one thread under callgrind
# (CPU 0) while wrk (CPU 1, 20 connections, bench/wrk_check.lua: POST
# /v1/check of one of 100k keys) runs 3 s and then, in a second run, 8 s;
# the figure is (I(8 s) - I(3 s)) / (N(8 s) - N(3 s)), so start-up and
# shutdown cancel out.  bench/serve_vs_nginx.sh does the same for nginx.
#
#   REDIS=1 bench/serve_insn.sh build/sluice   # --store redis:// instead
#
# With REDIS=1 each run has its own redis-server (on CPU 1, beside wrk)
# and serves bench/serve_redis_rules.yaml, as bench/serve_redis.sh does;
# the figure is the sluice process's instructions only.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- build-bench/sluice
port=18611
rport=18612
REDIS="${REDIS:-0}"
run() { # BINARY SECONDS -> "requests instructions"
  local out rp="" args=(--rules bench/serve_rules.yaml)
  out=$(mktemp)
  if [ "$REDIS" = 1 ]; then
    taskset -c 1 redis-server --port $rport --bind 127.0.0.1 --save "" \
      --appendonly no >/dev/null 2>&1 &
    rp=$!
    args=(--rules bench/serve_redis_rules.yaml --store "redis://127.0.0.1:$rport"
      --redis-timeout 1s)
  fi
  taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$out" "$1" serve \
    "${args[@]}" --listen 127.0.0.1:$port --threads 1 2>/dev/null &
  local vp=$!
  for _ in $(seq 100); do
    curl -s "http://127.0.0.1:$port/readyz" | grep -q '"status":"ready"' &&
      { [ "$REDIS" = 0 ] || curl -s "http://127.0.0.1:$port/readyz" | grep -q '"store_status":"up"'; } &&
      break
    sleep 0.2
  done
  local n
  n=$(taskset -c 1 wrk -t1 -c20 -d"$2"s -s bench/wrk_check.lua "http://127.0.0.1:$port/v1/check" |
    sed -n 's/ *\([0-9]*\) requests in.*/\1/p')
  kill -TERM "$vp"
  wait "$vp" 2>/dev/null || true
  if [ -n "$rp" ]; then kill "$rp"; wait "$rp" 2>/dev/null || true; fi
  echo "$n $(grep -m1 '^summary:\|^totals:' "$out" | awk '{print $2}')"
  rm -f "$out"
}
for bin in "$@"; do
  read -r n3 i3 < <(run "$bin" 3)
  read -r n8 i8 < <(run "$bin" 8)
  echo "$bin: $(((i8 - i3) / (n8 - n3))) user-space instructions per request ($n3 and $n8 requests)"
done
