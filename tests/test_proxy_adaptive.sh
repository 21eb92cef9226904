#!/bin/bash
# Integration test of the adaptive controller in `sluice proxy`
# (docs/adaptive.md): the real proxy in front of an upstream whose latency
# the test sets (tests/proxy/adaptive_upstream.py), under a steady load
# above the rule's limit (tests/proxy/adaptive_load.py).  Healthy and
# binding, the limit rises; the upstream slowed and saturated (a queue
# building), it falls (an override of
# source `controller` in /admin/v1/limits and /metrics); fast again it
# rises; idle, it goes back to the rule's number.  The trace the proxy
# wrote (--adaptive-trace) replays to the very limits it published; a
# manual override wins over the controller's and the lower automatic one
# is in force; bad adaptive rules are refused with file:line:col; an
# advisor's recommendation (--advisor) is applied.
# Every wait has a timeout; the processes are killed in a trap.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
source "$SOURCE_DIR/tests/sh/common.sh"
source "$SOURCE_DIR/tests/sh/adaptive.sh"

# Bad adaptive rules: refused at start with the place.
cat >"$tmp/bad.yaml" <<'YAML'
domain: api
descriptors:
  - key: generic_key
    value: global
    rate_limit:
      unit: second
      requests_per_unit: 100
      adaptive:
        controller: gradient
YAML
out=$("$SLUICE" proxy --rules "$tmp/bad.yaml" --upstream http://127.0.0.1:1 --listen 127.0.0.1:0 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q "bad.yaml:9:9: adaptive: both min and max are required" <<<"$out"; then
  pass "controller without min and max refused with file:line:col"
else bad "no min/max" "rc=$rc $out"; fi
sed -i '8,9d' "$tmp/bad.yaml"
echo "      adaptive: {min: 10, max: 20, controller: pid}" >>"$tmp/bad.yaml"
out=$("$SLUICE" proxy --rules "$tmp/bad.yaml" --upstream http://127.0.0.1:1 --listen 127.0.0.1:0 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q "bad.yaml:8:.*: adaptive: unknown controller: 'pid'" <<<"$out"; then
  pass "unknown controller refused with file:line:col"
else bad "controller pid" "rc=$rc $out"; fi

adaptive_config 30
head -c 32 /dev/urandom | base64 | tr -d '/+=\n' >"$tmp/token"
TOKEN=$(cat "$tmp/token")

start_upstream
UP=$UPORT
start_proxy proxy --config "$tmp/proxy.yaml" --rules "$tmp/rules.yaml" \
  --upstream "http://127.0.0.1:$UP" --threads 2 --metrics-listen 127.0.0.1:0 \
  --admin-listen 127.0.0.1:0 --admin-token-file "$tmp/token" \
  --adaptive-trace "$tmp/trace"
P=$PORT M=$MPORT A=$ADMIN

# wait_for SECONDS PYTHON-CONDITION-ON-L-AND-S: polls limit until it holds.
wait_for() {
  local n=$(($1 * 4)) cond=$2
  for _ in $(seq "$n"); do
    read -r L S < <(limit "$A")
    python3 -c "import sys; L, S = $L, '$S'; sys.exit(0 if ($cond) else 1)" 2>/dev/null && return 0
    sleep 0.25
  done
  return 1
}
metric() { grep -F "$1" "$tmp/metrics" | awk '{print $2}'; }

python3 "$SOURCE_DIR/tests/proxy/adaptive_load.py" "$P" /x 160 "$tmp/stop" &
pids+=($!)

# 1. Healthy, 160/s against 100/s: the limit binds and rises.
if wait_for 40 "L >= 110 and S == 'controller'"; then
  pass "healthy and binding: the limit rose to $L (source $S)"
else bad "rise" "limit $L $S; $(tail -5 "$tmp/proxy.log")"; fi

# 2. The upstream slows (5 ms -> 40 ms) and serves 3 at a time: 75/s at
# most, well under the limit (a sanitizer build's load may reach little
# more than 100/s, which 4 at a time would just keep up with), so a queue
# builds: the limit falls under the upstream's capacity.  (Slower alone,
# with no queue, it would only be cut by 10% and then taken as the
# upstream's speed: docs/adaptive.md.)
curl -s "http://127.0.0.1:$UP/__capacity/3" >/dev/null
curl -s "http://127.0.0.1:$UP/__delay/40" >/dev/null
if wait_for 30 "L < 100 and S == 'controller'"; then
  pass "upstream slowed, a queue building: the limit fell to $L (source $S)"
else bad "fall" "limit $L $S; $(tail -5 "$tmp/proxy.log")"; fi
# One scrape for all four; the override follows the controller's limit
# within its tick, so a scrape between the two is taken again.
for _ in $(seq 20); do
  curl -s -m 5 "http://127.0.0.1:$M/metrics" >"$tmp/metrics"
  eff=$(metric 'sluice_limit_requests_per_unit{domain="api",rule="upstream",limit="effective",source="controller"}')
  ad=$(metric 'sluice_adaptive_limit{rule="upstream"}')
  ov=$(metric 'sluice_adaptive_overload_windows_total{rule="upstream"}')
  dec=$(metric 'sluice_adaptive_actions_total{rule="upstream",action="decrease"}')
  [ -n "$eff" ] && [ "$eff" = "$ad" ] && break
  sleep 0.2
done
if [ -n "$eff" ] && [ "$eff" = "$ad" ] && [ "${ov:-0}" -ge 1 ] && [ "${dec:-0}" -ge 1 ]; then
  pass "/metrics: effective limit $eff from the controller, $ov overload windows"
else bad "metrics" "eff=$eff adaptive=$ad overload=$ov decrease=$dec"; fi
# the cuts by their reason, and the capacity the controller estimates.
cuts=$(grep -E '^sluice_adaptive_reasons_total\{rule="upstream",reason="(latency|slo|errors)"\}' \
  "$tmp/metrics" | awk '{s += $2} END {print s + 0}')
cap=$(metric 'sluice_adaptive_capacity{rule="upstream"}')
if [ "$cuts" -ge 1 ] && [ -n "$cap" ]; then
  pass "/metrics: $cuts cut(s) by reason, capacity $cap"
else bad "reasons" "cuts=$cuts capacity=$cap"; fi

# 3. A manual override wins over the controller's; deleted, the
# controller's is in force again.
code=$(curl -s -o "$tmp/put" -w '%{http_code}' -X PUT -H "Authorization: Bearer $TOKEN" \
  -H 'If-None-Match: *' -d '{"requests_per_unit":77,"ttl":"1m"}' \
  "http://127.0.0.1:$A/admin/v1/overrides/upstream")
read -r L S < <(limit "$A")
if [ "$code" = 201 ] && [ "$L $S" = "77 manual" ]; then
  pass "a manual override wins over the controller's"
else bad "manual" "$code $(cat "$tmp/put") -> $L $S"; fi
etag=$(curl -s -D - -o /dev/null "http://127.0.0.1:$A/admin/v1/overrides/upstream" | sed -n 's/^ETag: *//Ip' | tr -d '\r')
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $TOKEN" -H "If-Match: $etag" \
  "http://127.0.0.1:$A/admin/v1/overrides/upstream"
read -r L S < <(limit "$A")
[ "$S" = controller ] && pass "manual override deleted: the controller's in force ($L)" ||
  bad "manual deleted" "$L $S"

# 4. Fast again: the limit rises from its low (an increase is published).
ups() { grep -c '(increase: [a-z]*)$' "$tmp/proxy.log"; }
before=$(ups)
curl -s "http://127.0.0.1:$UP/__capacity/0" >/dev/null
curl -s "http://127.0.0.1:$UP/__delay/5" >/dev/null
for _ in $(seq 160); do [ "$(ups)" -gt "$before" ] && break; sleep 0.25; done
if [ "$(ups)" -gt "$before" ]; then
  pass "upstream fast again: the limit rose ($(grep '(increase: [a-z]*)$' "$tmp/proxy.log" | tail -1))"
else bad "recover" "$(tail -5 "$tmp/proxy.log")"; fi

# 5. Idle: back to the rule's number, the controller's override gone
# (30 idle windows: skipped under SL_TEST_QUICK).
touch "$tmp/stop"
if [ -n "${SL_TEST_QUICK:-}" ]; then
  echo "SKIP idle (SL_TEST_QUICK)"
elif wait_for 90 "L == 100 and S == 'rules'"; then
  pass "idle: back to the rule's 100 (source $S)"
else bad "relax" "limit $L $S; $(tail -5 "$tmp/proxy.log")"; fi

# 6. The trace replays to the limits the proxy published, in order; each
# line also says what the controller made of its window.
if awk -F'\t' 'NF != 3 || split($3, f, " ") != 4 { bad = 1 } END { exit bad }' "$tmp/trace"; then
  pass "the trace's lines: signal, then limit, action, reason, capacity"
else bad "trace" "$(head -2 "$tmp/trace")"; fi
grep -o 'adaptive: upstream: limit [0-9]*' "$tmp/proxy.log" | awk '{print $4}' >"$tmp/published"
awk -F'\t' '$1 == "upstream" {print $2}' "$tmp/trace" |
  "$SLUICE" replay --adaptive --base 100 --min 30 --max 200 --slo-p99 2s |
  awk '$3 == 1 {print $1}' >"$tmp/replayed"
if [ -s "$tmp/published" ] && cmp -s "$tmp/published" "$tmp/replayed"; then
  pass "the trace replays to the $(wc -l <"$tmp/published") published limits"
else bad "replay" "published $(tr '\n' ' ' <"$tmp/published") replayed $(tr '\n' ' ' <"$tmp/replayed")"; fi

stop_clean proxy "$PXPID"

# 7. The proxy polls an advisor (--advisor, as sluice serve does): a
# fixed answer recommending 60 for the rule, served as a file; the limit
# in force becomes it, source advisor.
AP=$(free_port)
mkdir -p "$tmp/adv/v1"
printf '{"protocol":"sluice-advisor/1","computed_at_ms":%s,"valid_for_ms":60000,"recommendations":[{"limit":"upstream","requests_per_unit":60}]}' "$(date +%s%3N)" \
  >"$tmp/adv/v1/recommendations"
python3 -m http.server "$AP" --bind 127.0.0.1 --directory "$tmp/adv" >/dev/null 2>&1 &
pids+=($!)
wait_port "$AP"
start_proxy advised --config "$tmp/proxy.yaml" --rules "$tmp/rules.yaml" \
  --upstream "http://127.0.0.1:$UP" --threads 1 --metrics-listen 127.0.0.1:0 \
  --admin-listen 127.0.0.1:0 --admin-token-file "$tmp/token" \
  --advisor "http://127.0.0.1:$AP" --advisor-interval 200ms
A=$ADMIN
if wait_for 10 "L == 60 and S == 'advisor'"; then
  m=$(curl -s -m 5 "http://127.0.0.1:$MPORT/metrics")
  grep -q 'sluice_advisor_polls_total{result="ok"} [1-9]' <<<"$m" &&
    pass "--advisor: the proxy applies the advisor's 60 (source advisor), polls in /metrics" ||
    bad "advisor metrics" "$(grep sluice_advisor <<<"$m")"
else bad "advisor" "limit $L $S; $(tail -5 "$tmp/advised.log")"; fi
stop_clean advised "$PXPID"
exit $fail
