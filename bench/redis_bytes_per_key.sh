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
source "$ROOT/bench/lib.sh"
throwaway_redis
port=$REDIS_PORT
"$BUILD/bench/redis_bytes_per_key" "redis://127.0.0.1:$port" "$N"
redis-server --version
