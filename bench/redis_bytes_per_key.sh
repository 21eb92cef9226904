#!/bin/bash
# bench/redis_bytes_per_key.sh - bytes of Redis memory per key for every
# algorithm of the Redis store: starts a throwaway redis-server (no
# persistence) on a free loopback port, runs bench/redis_bytes_per_key.c
# (N distinct keys per algorithm, used_memory delta / N), stops it.
#
#   bench/redis_bytes_per_key.sh [N]      N defaults to 100000
#
# Prints one JSON line per algorithm, then the redis-server version.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD:-$ROOT/build-bench}"
N="${1:-100000}"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target redis_bytes_per_key -j"$(nproc)" >/dev/null
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$dir" --daemonize no >"$dir/redis.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
"$BUILD/bench/redis_bytes_per_key" "redis://127.0.0.1:$port" "$N"
redis-server --version
