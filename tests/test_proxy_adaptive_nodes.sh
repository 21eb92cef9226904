#!/bin/bash
# Several proxies' adaptive controllers on one Redis (docs/adaptive.md):
# each node's limit is a proposal in Redis with a short TTL and the limit
# in force is the minimum of the live ones.  Proxies A and B share a
# limit; B's upstream slows, so B proposes less than A: A enforces B's.
# B killed, its proposal expires and only A's is left.  Real
# redis-server and proxies; every wait has a timeout.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
source "$SOURCE_DIR/tests/sh/common.sh"
source "$SOURCE_DIR/tests/sh/adaptive.sh"

start_redis

adaptive_config 20
# node NAME: an upstream and a proxy on the Redis (start_proxy's PORT,
# ADMIN, PXPID; UPORT).
node() {
  start_upstream
  redis_proxy "$1"
}
node a; A=$PORT AA=$ADMIN APID=$PXPID
node b; B=$PORT BU=$UPORT BPID=$PXPID
proposals() { rcli HVALS 'sluice:{overrides}:proposed:upstream' | sort -n | tr '\n' ' '; }

python3 "$SOURCE_DIR/tests/proxy/adaptive_load.py" "$A" /x 100 "$tmp/stop" &
pids+=($!)
python3 "$SOURCE_DIR/tests/proxy/adaptive_load.py" "$B" /x 100 "$tmp/stop" &
pids+=($!)

# Both warm up healthy (the baseline takes 10 windows) and, 200/s
# against 100/s, raise the limit; then B's upstream slows and B proposes
# less: A enforces the minimum of the two live proposals.
for _ in $(seq 120); do
  cat "$tmp/a.log" "$tmp/b.log" | grep -q '(increase: [a-z]*)$' && break
  sleep 0.5
done
curl -s "http://127.0.0.1:$BU/__delay/40" >/dev/null
for _ in $(seq 120); do
  grep -q '(decrease: [a-z]*)$' "$tmp/b.log" && break
  sleep 0.25
done
ok=""
for _ in $(seq 120); do
  read -r L S < <(limit "$AA")
  P=$(proposals)
  read -r lo hi rest <<<"$P"
  if [ -n "${hi:-}" ] && [ -z "${rest:-}" ] && [ "$L" = "$lo" ] &&
    { [ "$S" = controller ] || [ "$lo" = 100 ]; }; then ok=1; break; fi
  sleep 0.25
done
[ -n "$ok" ] && pass "two live proposals ($P): A enforces their minimum $L ($S)" ||
  bad "min" "proposals '$P', A in force $L $S; $(tail -3 "$tmp/b.log")"

kill -9 "$BPID"
n=2
for _ in $(seq 60); do
  n=$(rcli HLEN 'sluice:{overrides}:proposed:upstream')
  [ "$n" = 1 ] && break
  sleep 0.25
done
[ "$n" = 1 ] && pass "B killed: its proposal expired, A's alone ($(proposals))" ||
  bad "expiry" "$n proposals: $(proposals)"
stop_clean a "$APID"
exit $fail
