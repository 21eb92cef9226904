#!/bin/bash
# Several proxies' adaptive controllers on one Redis (docs/adaptive.md):
# each node's limit is a proposal in Redis with a short TTL and the limit
# in force is the minimum of the live ones.  Proxies A and B share a
# limit; B's upstream slows, so B proposes less than A: A enforces B's.
# B killed, its proposal expires and only A's is left.  Real
# redis-server and proxies; every wait has a timeout.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
tmp=$(mktemp -d)
pids=()
cleanup() {
  touch "$tmp/stop"
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
exec 2> >(grep -v 'Killed' >&2) # the trap's kills are not failures
source "$SOURCE_DIR/tests/sh/common.sh"
command -v redis-server >/dev/null || { echo "SKIP no redis-server"; exit 0; }

RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
pids+=($!)
wait_port "$RP"
rcli() { redis-cli -p "$RP" "$@"; }

cat >"$tmp/rules.yaml" <<'YAML'
domain: api
descriptors:
  - key: generic_key
    value: global
    rate_limit:
      name: upstream
      unit: second
      requests_per_unit: 100
      adaptive: {min: 20, max: 200, controller: gradient, slo_p99: 2s}
YAML
cat >"$tmp/proxy.yaml" <<'YAML'
routes:
  - prefix: /
    domain: api
    descriptors:
      - - generic_key: {value: global}
YAML
# node NAME: an upstream and a proxy; sets PORT, ADMIN, UPORT, PXPID.
node() {
  UPORT=$(free_port)
  python3 "$SOURCE_DIR/tests/proxy/adaptive_upstream.py" "$UPORT" &
  pids+=($!)
  wait_port "$UPORT"
  "$SLUICE" proxy --config "$tmp/proxy.yaml" --rules "$tmp/rules.yaml" \
    --upstream "http://127.0.0.1:$UPORT" --threads 1 --listen 127.0.0.1:0 \
    --admin-listen 127.0.0.1:0 --store "redis://127.0.0.1:$RP" \
    --redis-timeout 100ms 2>"$tmp/$1.log" &
  PXPID=$!
  pids+=($PXPID)
  for _ in $(seq 200); do
    PORT=$(sed -n 's/.*: listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$1.log")
    ADMIN=$(sed -n 's/.*admin listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$1.log")
    [ -n "$PORT" ] && [ -n "$ADMIN" ] && return 0
    sleep 0.05
  done
  echo "FAIL start $1: $(cat "$tmp/$1.log")"; exit 1
}
node a; A=$PORT AA=$ADMIN
node b; B=$PORT BU=$UPORT BPID=$PXPID
limit() {
  curl -s -m 5 "http://127.0.0.1:$AA/admin/v1/limits" | python3 -c '
import json, sys
r = json.load(sys.stdin)["limits"][0]
print(r["requests_per_unit"], r["source"])'
}
proposals() { rcli HVALS 'sluice:{overrides}:proposed:upstream' | sort -n | tr '\n' ' '; }

python3 "$SOURCE_DIR/tests/proxy/adaptive_load.py" "$A" /x 100 "$tmp/stop" &
pids+=($!)
python3 "$SOURCE_DIR/tests/proxy/adaptive_load.py" "$B" /x 100 "$tmp/stop" &
pids+=($!)

# Both warm up healthy (the baseline takes 10 windows), then B's upstream
# slows: B proposes less, and A enforces the minimum.
for _ in $(seq 60); do
  grep -q '(increase)$' "$tmp/b.log" && break
  sleep 0.5
done
curl -s "http://127.0.0.1:$BU/__delay/40" >/dev/null
ok=""
for _ in $(seq 120); do
  read -r L S < <(limit)
  P=$(proposals)
  read -r lo hi rest <<<"$P"
  if [ -n "${hi:-}" ] && [ -z "${rest:-}" ] && [ "$lo" -lt "$hi" ] &&
    [ "$S" = controller ] && [ "$L" = "$lo" ]; then ok=1; break; fi
  sleep 0.25
done
[ -n "$ok" ] && pass "two live proposals ($P): A enforces their minimum $L" ||
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
exit $fail
