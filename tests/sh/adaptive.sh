# tests/sh/adaptive.sh - sourced by the adaptive controller's tests
# (tests/test_proxy_adaptive*.sh), after common.sh: their temporary
# directory and cleanup, the upstream (tests/proxy/adaptive_upstream.py),
# redis-server, proxies, and the limit in force from the admin API.
tmp=$(mktemp -d)
pids=()
cleanup() {
  touch "$tmp/stop" # the load generators stop on it
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
exec 2> >(grep -v 'Killed' >&2) # the trap's kills are not failures

# adaptive_rules RPU ADAPTIVE [LINE...]: $tmp/rules.yaml, the rule
# "upstream" (RPU a second, its adaptive: mapping ADAPTIVE, and LINEs of
# its rate_limit such as "burst: 30"), and $tmp/proxy.yaml, every path
# under it.
adaptive_rules() {
  local rpu=$1 adaptive=$2 line
  shift 2
  {
    printf 'domain: api\ndescriptors:\n  - key: generic_key\n    value: global\n'
    printf '    rate_limit:\n      name: upstream\n      unit: second\n'
    printf '      requests_per_unit: %s\n' "$rpu"
    for line in "$@"; do printf '      %s\n' "$line"; done
    printf '      adaptive: %s\n' "$adaptive"
  } >"$tmp/rules.yaml"
  cat >"$tmp/proxy.yaml" <<'YAML'
routes:
  - prefix: /
    domain: api
    descriptors:
      - - generic_key: {value: global}
YAML
}

# adaptive_config MIN: the rule of 100/s, adaptive MIN..200, gradient,
# slo_p99 2s (adaptive_rules).
adaptive_config() {
  adaptive_rules 100 "{min: $1, max: 200, controller: gradient, slo_p99: 2s}"
}

# start_upstream: sets UPORT.
start_upstream() {
  UPORT=$(free_port)
  python3 "$SOURCE_DIR/tests/proxy/adaptive_upstream.py" "$UPORT" &
  pids+=($!)
  wait_port "$UPORT"
}

# start_redis: sets RP and RPID; a test without redis-server is skipped.
# rcli ARGS...: redis-cli on it.
start_redis() {
  command -v redis-server >/dev/null || { echo "SKIP no redis-server"; exit 0; }
  RP=$(free_port)
  redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
  RPID=$!
  pids+=($RPID)
  wait_port "$RP"
}
rcli() { redis-cli -p "$RP" "$@"; }

# start_proxy NAME ARGS...: sets PORT, MPORT and ADMIN (when listening)
# and PXPID; the log is $tmp/NAME.log.
start_proxy() {
  local name=$1
  shift
  "$SLUICE" proxy "$@" --listen 127.0.0.1:0 2>"$tmp/$name.log" &
  PXPID=$!
  pids+=($PXPID)
  for _ in $(seq 200); do
    PORT=$(sed -n 's/.*: listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
    MPORT=$(sed -n 's/.*metrics listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
    ADMIN=$(sed -n 's/.*admin listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
    [ -n "$PORT" ] && { [ -n "$ADMIN" ] || ! grep -q -- --admin-listen <<<"$*"; } && return 0
    sleep 0.05
  done
  echo "FAIL start $name: $(cat "$tmp/$name.log")"
  exit 1
}

# redis_proxy NAME ARGS...: start_proxy of adaptive_config's rules in
# front of the upstream at $UPORT, on the Redis at $RP, with an admin
# listener, and ARGS.
redis_proxy() {
  local name=$1
  shift
  start_proxy "$name" --config "$tmp/proxy.yaml" --rules "$tmp/rules.yaml" \
    --upstream "http://127.0.0.1:$UPORT" --threads 1 \
    --admin-listen 127.0.0.1:0 --store "redis://127.0.0.1:$RP" \
    --redis-timeout 100ms "$@"
}

# limit ADMIN-PORT: "RPU SOURCE" of the rule in force.
limit() {
  curl -s -m 5 "http://127.0.0.1:$1/admin/v1/limits" | python3 -c '
import json, sys
r = json.load(sys.stdin)["limits"][0]
print(r["requests_per_unit"], r["source"])'
}

# stop_clean NAME PID: SIGTERM; passes when it exits and its log has
# nothing from the sanitizers (ASan, TSan builds).
stop_clean() {
  kill -TERM "$2"
  for _ in $(seq 200); do kill -0 "$2" 2>/dev/null || break; sleep 0.05; done
  if ! kill -0 "$2" 2>/dev/null && ! grep -q Sanitizer "$tmp/$1.log"; then
    pass "$1: clean stop"
  else bad "$1 stop" "$(grep -A20 Sanitizer "$tmp/$1.log" | head -40)"; fi
}
