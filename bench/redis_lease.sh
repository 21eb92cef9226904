#!/bin/bash
# What leases save Redis (docs/stores.md, "Leases"): sluice serve --store
# redis with a `sync: {mode: lease}` fixed_window rule, leases on (the
# default --lease-bytes) and off (--lease-bytes 0: every decision exact),
# and the peer's Redis+Lua token bucket (one EVALSHA a decision), in the
# same run on one Redis, on four loads (bench/wrk_negcache.lua):
#   hot    one key, under its limit of 1000000/s (MIX=hot)
#   abuse  2000 keys, 10% of them taking 50% of the requests (MIX=abuse)
#   random 100,000 keys, each request's at random (MIX=random)
#   tbhot  one key of a leased token_bucket, under its rate (MIX=tbhot)
# Rules: fixed_window 1000000/s per key, and token_bucket 1000000/s with a
# burst of 1000000 per key, lease_share 0.1 (bench/redis_lease_rules.yaml);
# the peer: EVALSHA token_bucket.lua 1 <key> 1000000 1000000, on one key
# (hot, tbhot), 2000 random keys (abuse) or 100,000 (random), from
# $PEERS_DIR/redis/ (read at run time).
#
#   bench/redis_lease.sh                 # 3 alternating rounds of 10 s
#   ROUNDS=5 DUR=20s bench/redis_lease.sh
#
# Layout and measures: bench/redis_on_off.sh.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BENCH=redis_lease FLAG=--lease-bytes ON=sluice_lease
PEER_ARGS="1000000 1000000"
MIXES="${MIXES:-hot abuse random tbhot}"
source "$HERE/redis_on_off.sh"
