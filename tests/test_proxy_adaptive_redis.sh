#!/bin/bash
# The outage guard of the adaptive controller (docs/adaptive.md): with
# --store redis and --redis-failure fail_open, when Redis is gone a rule
# with `controller: gradient` is still enforced, locally at its share of
# the limit in force, while a plain rule is let open.  A real
# redis-server, killed mid-test; every wait has a timeout.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
source "$SOURCE_DIR/tests/sh/common.sh"
source "$SOURCE_DIR/tests/sh/adaptive.sh"

start_redis
start_upstream

# Token buckets of 5 an hour: no window edge to race.
cat >"$tmp/rules.yaml" <<'YAML'
domain: api
descriptors:
  - key: generic_key
    value: guarded
    rate_limit:
      unit: hour
      requests_per_unit: 5
      algorithm: token_bucket
      adaptive: {min: 1, max: 10, controller: gradient}
  - key: generic_key
    value: open
    rate_limit:
      unit: hour
      requests_per_unit: 5
      algorithm: token_bucket
YAML
cat >"$tmp/proxy.yaml" <<'YAML'
routes:
  - prefix: /guarded
    domain: api
    descriptors:
      - - generic_key: {value: guarded}
  - prefix: /open
    domain: api
    descriptors:
      - - generic_key: {value: open}
YAML
start_proxy proxy --config "$tmp/proxy.yaml" --rules "$tmp/rules.yaml" \
  --upstream "http://127.0.0.1:$UPORT" --threads 1 \
  --store "redis://127.0.0.1:$RP" --redis-failure fail_open --redis-timeout 50ms
P=$PORT PID=$PXPID

# codes PATH N: the N answers' statuses, sorted and counted.
codes() {
  for _ in $(seq "$2"); do
    curl -s -m 5 -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$P$1"
  done | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}'
}
up=$(codes /guarded 1)$(codes /open 1)
[ "$up" = "200:1 200:1 " ] && pass "Redis up: both rules decide on it" ||
  bad "redis up" "$up"

kill -9 "$RPID"
g=$(codes /guarded 10)
o=$(codes /open 10)
# 5 an hour, this node's share (--nodes 1): at most 5 more.
ok=$(sed -n 's/.*200:\([0-9]*\).*/\1/p' <<<"$g")
no=$(sed -n 's/.*429:\([0-9]*\).*/\1/p' <<<"$g")
[ "${ok:-0}" -le 5 ] && [ "${no:-0}" -ge 5 ] && pass "Redis gone: the gradient rule still enforced locally ($g)" ||
  bad "guard" "$g; $(tail -3 "$tmp/proxy.log")"
[ "$o" = "200:10 " ] && pass "Redis gone: the plain rule fail_open ($o)" ||
  bad "open" "$o"
stop_clean proxy "$PID"
exit $fail
