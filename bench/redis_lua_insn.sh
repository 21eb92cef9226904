#!/bin/bash
# bench/redis_lua_insn.sh - lua5.1's instructions per decision of the
# Redis store's Lua alone (bench/redis_lua.lua: redis.call stubbed by a
# table, no Redis), exact (valgrind callgrind), less the driver's own
# (the same calls to a run() that does nothing).  Quick to run while
# changing the Lua; what Redis spends is bench/redis_insn.sh's.
#
#   bench/redis_lua_insn.sh                      # this tree's Lua
#   DIR=/tmp/old/src/redis/lua bench/redis_lua_insn.sh   # another's
#   SPEC='3 100 60000000000 0 0 0 600000000 1' bench/redis_lua_insn.sh
#   KEYS=100 bench/redis_lua_insn.sh             # most calls find a state
#
# N decisions (2000) per case, BATCHES (1 64) calls per run.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${DIR:-$ROOT/src/redis/lua}"
N="${N:-2000}"
BATCHES="${BATCHES:-1 64}"
SPEC="${SPEC:-0 100 1000000000 100 0 0 10000000 1}"
# The files in script.cmake's order (its `set(lua ...)`).
ORDER=$(sed -n '/set(lua/,/)/p' "$ROOT/src/redis/lua/script.cmake" |
  sed 's/set(lua//; s/)//' | tr '\n' ' ')
export ORDER
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
count() {
  valgrind --tool=callgrind --callgrind-out-file="$OUT" \
    lua5.1 "$ROOT/bench/redis_lua.lua" insn "$DIR" "$@" >/dev/null 2>&1
  awk '/^summary:/ { print $2; exit }' "$OUT"
}
for b in $BATCHES; do
  all=$(count "$N" "$b" "$SPEC")
  own=$(count "$N" "$b" "$SPEC" noop)
  echo "lua batch=$b spec='$SPEC' insn_per_decision=$(( (all - own) / N ))"
done
