#!/bin/bash
# The adaptive limit through a Redis outage (docs/adaptive.md, "The outage
# guard"): two proxies on one Redis and one upstream that a slowdown
# makes the controllers cut; Redis then paused (SIGSTOP) for 16 s, longer
# than the controller override's 10 s TTL.  Throughout, each proxy keeps
# the last agreed limit (source controller, held past its TTL, never the
# rule's own 300), enforcing its share locally (--nodes 2), so that what
# reaches the upstream stays within 1.3 x that limit every second; once
# Redis is back, the renewal lands, the holds end and decisions count in
# Redis again.  Real redis-server, proxies and upstream; every wait has a
# timeout, and the bounds come from the limits observed.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
source "$SOURCE_DIR/tests/sh/common.sh"
source "$SOURCE_DIR/tests/sh/adaptive.sh"

start_redis
# The upstream of tests/test_proxy_adaptive_slower.sh: 4 at a time x 25 ms
# (160/s), a queue of 80 then 503; a token bucket of 300/s (burst 30)
# before it.
adaptive_rules 300 "{min: 40, max: 600, controller: gradient, slo_p99: 150ms}" \
  "algorithm: token_bucket" "burst: 30"
start_upstream
for c in capacity/4 delay/25 queue/80; do
  curl -s "http://127.0.0.1:$UPORT/__$c" >/dev/null
done
redis_proxy a --nodes 2; A=$PORT AA=$ADMIN APID=$PXPID
redis_proxy b --nodes 2; B=$PORT BA=$ADMIN BPID=$PXPID
arrived() { curl -s -m 5 "http://127.0.0.1:$UPORT/__arrived"; }

# 2 x 125/s; after a healthy start the upstream turns 3 times slower
# (about 53/s) and the controllers cut toward its capacity.
python3 "$SOURCE_DIR/tests/proxy/adaptive_load.py" "$A" /x 125 "$tmp/stop" 32 &
pids+=($!)
python3 "$SOURCE_DIR/tests/proxy/adaptive_load.py" "$B" /x 125 "$tmp/stop" 32 &
pids+=($!)
sleep 12
curl -s "http://127.0.0.1:$UPORT/__delay/75" >/dev/null
low=""
for _ in $(seq 240); do
  read -r LA SA < <(limit "$AA")
  read -r LB SB < <(limit "$BA")
  if [ "$SA" = controller ] && [ "$SB" = controller ] && [ "$LA" = "$LB" ] &&
    [ "$LA" -lt 100 ]; then low=$LA; break; fi
  sleep 0.25
done
[ -n "$low" ] && pass "the upstream slowed: both proxies at the agreed limit $low (controller)" ||
  { bad "cut" "A $LA $SA, B $LB $SB; $(grep adaptive "$tmp/a.log" | tail -5)"; exit 1; }

# Redis paused for 16 s: sample both limits twice a second and what
# reaches the upstream each second.
kill -STOP "$RPID"
paused_at=$(date +%s.%N)
elapsed() { python3 -c "print(int(($(date +%s.%N) - $1) * 1000))"; }
worst="" most=0 prev=$(arrived) prev_t=$(date +%s.%N) over=""
while [ "$(elapsed "$paused_at")" -lt 16000 ]; do
  sleep 0.4
  for ad in "$AA" "$BA"; do
    read -r L S < <(limit "$ad")
    if [ "$S" != controller ] || [ "$L" -gt "$low" ]; then worst="${worst}${L}($S) "; fi
    [ "$L" -gt "$most" ] && most=$L
  done
  if [ "$(elapsed "$prev_t")" -ge 1000 ]; then
    now=$(arrived) now_t=$(date +%s.%N)
    rate=$(python3 -c "print(round(($now - $prev) / ($now_t - $prev_t), 1))")
    python3 -c "import sys; sys.exit(0 if $rate <= 1.3 * $low + 5 else 1)" ||
      over="${over}${rate}/s "
    prev=$now prev_t=$now_t
  fi
done
curl -s "http://127.0.0.1:$AA/admin/v1/overrides" >"$tmp/held.json"
kill -CONT "$RPID"
outage=$(python3 -c "print(round($(date +%s.%N) - $paused_at, 1))")
[ -z "$worst" ] &&
  pass "Redis paused ${outage} s (past the 10 s TTL): both kept the adaptive limit (at most $most), never the rule's 300" ||
  bad "held" "limits seen: $worst; $(tail -5 "$tmp/a.log")"
[ -z "$over" ] && pass "the upstream got at most 1.3 x the limit every second of the outage" ||
  bad "protected" "seconds over 1.3 x $low: $over"
python3 - "$tmp/held.json" <<'PY' && pass "GET /admin/v1/overrides shows the hold (held_until_ms past expires_ms)" || bad "held view" "$(cat "$tmp/held.json")"
import json, sys
o = [x for x in json.load(open(sys.argv[1]))["overrides"] if x["source"] == "controller"]
assert len(o) == 1 and o[0]["held_until_ms"] > o[0]["expires_ms"] and o[0]["state"] == "active", o
PY

# Back: the renewal reaches Redis, the hold ends, decisions count there.
# scripts: the script calls Redis has run (EVAL, EVALSHA, FCALL and kin).
scripts() { rcli INFO commandstats | tr -d '\r' | awk -F'[=:,]' '/^cmdstat_(eval|fcall)/ {n += $3} END {print n + 0}'; }
before=$(scripts)
ok=""
for _ in $(seq 80); do
  sleep 0.25
  a=$(curl -s -m 5 "http://127.0.0.1:$AA/admin/v1/overrides")
  b=$(curl -s -m 5 "http://127.0.0.1:$BA/admin/v1/overrides")
  if ! grep -q held_until_ms <<<"$a$b" && grep -q '"controller"' <<<"$a"; then ok=1; break; fi
done
# The workers' breakers try Redis again on their own backoff: poll.
after=$before
for _ in $(seq 80); do
  after=$(scripts)
  [ "$after" -gt "$before" ] && break
  sleep 0.25
done
shared=$(rcli HGET 'sluice:{overrides}' 'controller|upstream' 2>/dev/null)
[ -n "$ok" ] && [ "${after:-0}" -gt "${before:-0}" ] && grep -q '"requests_per_unit"' <<<"$shared" &&
  pass "Redis back: the override renewed there, the holds ended, decisions on Redis again (script calls $before -> $after)" ||
  bad "back" "held: $(grep -o 'held_until_ms[^,]*' <<<"$a$b"); calls $before -> $after; redis '$shared'"
touch "$tmp/stop"
stop_clean a "$APID"
stop_clean b "$BPID"
exit $fail
