#!/bin/bash
# bench/state_save.sh - the memory store's state file at N keys, beside
# Redis persisting as many: for each N (default 1M and 10M),
#   - bench/state_save.c: N gcra keys saved (sl_memory_store_save) while a
#     thread decides on random keys of them, then loaded into a new store:
#     save and load seconds, file bytes, the longest the save held a shard,
#     the longest decision during the save and its CPU time (spinning on a
#     lock) beside the time it waited for a core;
#   - a throwaway redis-server filled with N string keys of 16 bytes
#     (DEBUG POPULATE; a gcra state is two 8-byte words): SAVE's time,
#     BGSAVE's time and its fork's stall (latest_fork_usec: every command
#     waits it out), the RDB file's size, and a restart's load time.
#
#   bench/state_save.sh [N...]
#
# Prints one JSON line per store and N.  The files go to a temporary
# directory under $TMPDIR (default /tmp): its disk is part of the figures.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD:-$ROOT/build-bench}"
[ $# -eq 0 ] && set -- 1000000 10000000
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target state_save -j2 >/dev/null
dir=$(mktemp -d)
redis_pid=
trap '[ -n "$redis_pid" ] && kill $redis_pid 2>/dev/null; rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ms() { echo $(($(date +%s%N) / 1000000)); }
cli() { redis-cli -p "$port" "$@"; }
info() { cli info "$1" | tr -d '\r' | sed -n "s/^$2://p"; }

start_redis() {
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$dir" --dbfilename dump.rdb --enable-debug-command yes \
    --daemonize no >"$dir/redis.log" 2>&1 &
  redis_pid=$!
  until cli ping 2>/dev/null | grep -q PONG; do sleep 0.01; done
}

for n in "$@"; do
  "$BUILD/bench/state_save" -k "$n" -f "$dir/state"

  rm -f "$dir/dump.rdb"
  start_redis
  cli debug populate "$n" user: 16 >/dev/null
  t0=$(ms); cli save >/dev/null; save_ms=$(($(ms) - t0))
  size=$(stat -c %s "$dir/dump.rdb")
  t0=$(ms); cli bgsave >/dev/null
  until [ "$(info persistence rdb_bgsave_in_progress)" = 0 ]; do sleep 0.005; done
  bgsave_ms=$(($(ms) - t0))
  fork_us=$(info stats latest_fork_usec)
  cli shutdown nosave >/dev/null 2>&1 || true
  wait "$redis_pid" 2>/dev/null || true
  t0=$(ms); start_redis
  until [ "$(info persistence loading)" = 0 ]; do sleep 0.005; done
  load_ms=$(($(ms) - t0))
  keys=$(cli dbsize)
  cli shutdown nosave >/dev/null 2>&1 || true
  wait "$redis_pid" 2>/dev/null || true
  redis_pid=
  printf '{"peer":"redis","keys":%s,"save_s":%.3f,"bgsave_s":%.3f,"bgsave_fork_stall_ms":%.3f,"load_s":%.3f,"file_bytes":%s,"bytes_per_key":%.1f}\n' \
    "$keys" "$(echo "$save_ms/1000" | bc -l)" "$(echo "$bgsave_ms/1000" | bc -l)" \
    "$(echo "$fork_us/1000" | bc -l)" "$(echo "$load_ms/1000" | bc -l)" "$size" \
    "$(echo "$size/$keys" | bc -l)"
done
redis-server --version
nproc
