#!/bin/bash
# What the negative cache saves Redis: sluice serve --store redis with the
# cache (the default) and without it (--negative-cache-bytes 0), and the
# peer's Redis+Lua token bucket (one EVALSHA a decision), in the same run
# on one Redis, on three loads:
#   hot    one key hammered far over its limit (MIX=hot, bench/wrk_negcache.lua)
#   abuse  2000 keys, 10% of them over their limit taking 50% of the
#          requests (MIX=abuse)
#   random 100,000 keys, each request's at random (MIX=random)
# Rule: token_bucket 20/s burst 20 per key (bench/redis_negative_cache_rules.yaml);
# the peer: EVALSHA token_bucket.lua 1 <key> 20 20, on one key (hot),
# 2000 random keys (abuse) or 100,000 (random), from $PEERS_DIR/redis/
# (read at run time).
#
#   bench/redis_negative_cache.sh            # 3 alternating rounds of 10 s
#   ROUNDS=5 DUR=20s bench/redis_negative_cache.sh
#   THREADS=2 bench/redis_negative_cache.sh   # two loop threads, two caches
#
# Layout and measures: bench/redis_on_off.sh.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BENCH=redis_negative_cache FLAG=--negative-cache-bytes ON=sluice_negcache
PEER_ARGS="20 20"
MIXES="${MIXES:-hot abuse random}"
source "$HERE/redis_on_off.sh"
