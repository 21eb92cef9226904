#!/bin/bash
# bench/redis_insn.sh - Redis's instructions per decision (exact, valgrind
# callgrind on redis-server): the Redis store's script called by FCALL and
# by EVALSHA, alone and in batches (bench/redis_script_cost.c, the same
# calls: token_bucket 100/s burst 100, random keys of 100k, 16 deep), and
# the peer's token-bucket script ($PEERS_DIR/redis/token_bucket.lua) one
# EVALSHA per decision (redis-benchmark).  Counts everything Redis does for
# them: reading, the script, the key commands, answering.
#
#   bench/redis_insn.sh                  # N=20000 decisions per case
#   N=5000 BATCHES="1 64" bench/redis_insn.sh
#   KEYS=100 bench/redis_insn.sh         # keys of 100: most calls find
#                                        # their key's state (sluice only)
#   COST=/tmp/old/redis_script_cost bench/redis_insn.sh
#                                        # another build's (a copy of
#                                        # main's), run as it is
#
# Per case: "name via=... batch=B insn_per_decision=...".  The counters are
# zeroed after the scripts are loaded and the keys flushed
# (callgrind_control -z), and read after the case (-d).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD:-$ROOT/build-bench}"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}"
N="${N:-20000}"
BATCHES="${BATCHES:-1 10 64}"
if [ -z "${COST:-}" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" --target redis_script_cost -j2 >/dev/null
  COST="$BUILD/bench/redis_script_cost"
fi
DIR=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.%p" \
  redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$DIR" >"$DIR/redis.log" 2>&1 &
VPID=$!
trap 'kill $VPID 2>/dev/null; wait $VPID 2>/dev/null; rm -rf "$DIR"' EXIT
CLI="redis-cli -p $PORT"
for _ in $(seq 300); do $CLI ping >/dev/null 2>&1 && break; sleep 0.1; done
TB=$($CLI SCRIPT LOAD "$(cat "$PEERS_DIR/redis/token_bucket.lua")")
# The script and the library loaded as the store loads them: one run of
# one decision (its figures are not kept).
"$COST" "$PORT" 1 1 >/dev/null

# insn NAME CMD...: Redis's instructions while CMD runs, per decision.
insn() {
  local name=$1 dump
  shift
  $CLI FLUSHALL >/dev/null
  callgrind_control -z "$VPID" >/dev/null 2>&1
  "$@" >/dev/null 2>&1
  rm -f "$DIR"/cg.*.[0-9]*
  callgrind_control -d "$VPID" >/dev/null 2>&1
  dump=$(ls -t "$DIR"/cg.*.[0-9]* | head -1)
  awk -v name="$name" -v n="$DECISIONS" '/^summary:|^totals:/ { t = $2 }
    END { printf "%s insn_per_decision=%.0f\n", name, t / n }' "$dump"
}

DECISIONS=$N insn "peer_token_bucket via=evalsha batch=1" \
  redis-benchmark -p "$PORT" -c 16 -n "$N" -r 100000 -P 1 -q \
  EVALSHA "$TB" 1 rl:tb:__rand_int__ 100 100
for b in $BATCHES; do
  for via in fcall evalsha; do
    n=$(( (N + b - 1) / b * b ))
    DECISIONS=$n VIA=$via LOADED=1 insn "sluice_script via=$via batch=$b" \
      "$COST" "$PORT" "$N" "$b"
  done
done
redis-server --version | cut -d" " -f1-3
