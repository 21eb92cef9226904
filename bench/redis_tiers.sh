#!/bin/bash
# Both tiers at once on the issue's abuse mix: the negative cache (refused
# keys answered locally until their wait ends) and leases (a hot key's
# allowed decisions answered from units Redis counted for the node),
# against neither (--negative-cache-bytes 0 --lease-bytes 0: every
# decision exact, batched) and the peer's Redis+Lua token bucket (one
# EVALSHA a decision), in the same run on one Redis:
#   abuse  2000 keys, 10% of them (each 9 times as busy as each of the
#          others) taking 50% of the requests (MIX=abuse,
#          bench/wrk_negcache.lua): the busy ones go over their limit
# Rule: fixed_window 300 per 10 s per key with leases
# (bench/redis_tiers_rules.yaml); the peer: EVALSHA token_bucket.lua 1
# <key> 30 300 on 2000 random keys, from $PEERS_DIR/redis/ (read at run
# time).
#
#   bench/redis_tiers.sh                  # 3 alternating rounds of 10 s
#   ROUNDS=5 DUR=20s bench/redis_tiers.sh
#
# Layout and measures: bench/redis_on_off.sh.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BENCH=redis_tiers FLAG="--negative-cache-bytes --lease-bytes" ON=sluice_tiers
PEER_ARGS="30 300"
MIXES="${MIXES:-abuse}"
source "$HERE/redis_on_off.sh"
