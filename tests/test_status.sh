#!/bin/bash
# test_status.sh - the live status page.  Its JSON (GET /status.json) after
# known traffic: the rules with their limits, the checks, the hottest keys
# and rules with exact counts (below K keys the tables are exact), the
# history, in all and per rule; the page's headers (a CSP that allows no other origin); where
# it is served: the main listener when there is no admin listener, only
# the admin one when there is.  Then a real headless browser (Debian's
# chromium driven by puppeteer-core, tests/status/status.js): the page
# loads with no console error, shows the rules and the state file's load
# and last save, and its counters move when traffic flows.  And docs/operations.md's examples.
#
# Needs SLUICE, SOURCE_DIR, chromium and tests/status/node_modules
# (scripts/deps.sh --test installs both).
set -euo pipefail
: "${SLUICE:?path of the built sluice binary}"
: "${SOURCE_DIR:?the source tree}"
. "$SOURCE_DIR/tests/sh/common.sh"

scratch_with_daemons

start() { # NAME PORT ARGS...
  local name=$1 port=$2
  shift 2
  "$SLUICE" serve --rules "$SOURCE_DIR/examples/rules" --listen 127.0.0.1:"$port" "$@" 2>"$tmp/$name.log" &
  pids+=($!)
  wait_port "$port"
}
check() { # USER: one /v1/check of tenant acme, that user; prints the status
  curl -s -o /dev/null -w '%{http_code}\n' -X POST "$1/v1/check" \
    -d "{\"domain\":\"api\",\"descriptors\":[{\"entries\":[{\"key\":\"tenant\",\"value\":\"acme\"},{\"key\":\"user\",\"value\":\"$2\"}]}]}"
}

port=$(free_port); mport=$(free_port)
start main "$port" --metrics-listen 127.0.0.1:"$mport"
wait_port "$mport"
base="http://127.0.0.1:$port" mbase="http://127.0.0.1:$mport"
for i in 1 2 3 4 5 6 7; do check "$base" alice; done >/dev/null
for i in 1 2 3; do check "$base" bob; done >/dev/null
curl -s "$mbase/status.json" >"$tmp/status.json"
s_page=$(curl -s -o /dev/null -w '%{http_code}' "$mbase/status")
s_pub=$(curl -s -o "$tmp/pub.json" -w '%{http_code}' "$base/status.json")
[ "$s_page" = 200 ] && [ "$s_pub" = 404 ] && grep -q -- "--metrics-listen" "$tmp/pub.json" &&
  ! grep -q alice "$tmp/pub.json" &&
  pass "the page is on --metrics-listen (200), not on the public listener (404, naming where it is)" ||
  bad "where" "metrics $s_page, public $s_pub $(cat "$tmp/pub.json")"
python3 - "$tmp/status.json" <<'PY' && pass "status.json: rules, checks, exact hot keys and rules, history" || bad "status.json" "see above"
import json, sys
s = json.load(open(sys.argv[1]))
rules = {r["id"]: r for r in s["rules"]}
assert rules["user_burst"]["requests_per_unit"] == 10 and rules["user_burst"]["period_ms"] == 1000, rules
assert s["checks"] == {"ok": 10, "over_limit": 0}, s["checks"]
assert s["store"]["kind"] == "memory" and s["store"]["status"] == "up", s["store"]
keys = {(k["rule"], k["key"]): k for k in s["hot_keys"]}
assert all(k["domain"] == "api" for k in s["hot_keys"]), s["hot_keys"]
alice = keys[("user_burst", "tenant=acme, user=alice")]
assert (alice["decisions"], alice["over_limit"], alice["error"]) == (7, 0, 0), alice
assert s["hot_keys"][0]["key"] == "tenant=acme, user=alice", s["hot_keys"][0]
bob = keys[("user_hourly", "tenant=acme, user=bob")]
assert bob["decisions"] == 3, bob
hr = {r["rule"]: r["decisions"] for r in s["hot_rules"]}
assert hr == {"user_burst": 10, "user_hourly": 10}, hr
pts = s["history"]["points"]
assert s["history"]["step_s"] == 5 and len(pts) == 120, len(pts)
assert sum(p["within"] for p in pts) == 20 and sum(p["over"] for p in pts) == 0, pts[-3:]
assert all(b["t_ms"] - a["t_ms"] == 5000 for a, b in zip(pts, pts[1:]))
per = {r["rule"]: r for r in s["history"]["rules"]}
assert set(per) == {"user_burst", "user_hourly"}, per.keys()
for r in per.values():
    assert len(r["decisions"]) == 120 and len(r["over_limit"]) == 120, r
    assert sum(r["decisions"]) == 10 and sum(r["over_limit"]) == 0, r
assert sum(s["history"]["other"]["decisions"]) == 0, s["history"]["other"]
PY
csp=$(curl -s -D - -o "$tmp/page.html" "$mbase/status" | tr -d '\r' | sed -n 's/^Content-Security-Policy: //p')
grep -q "default-src 'none'" <<<"$csp" && ! grep -Eq 'src=|href=|@import|url\(' "$tmp/page.html" &&
  pass "the page: one static file with nothing external, and a CSP of default-src 'none'" ||
  bad "page" "csp '$csp'"

# Every example of docs/operations.md runs against this serve.
python3 - "$tmp/docs" "$SOURCE_DIR/docs/operations.md" <<'PY' || fail=1
import os, re, sys
os.makedirs(sys.argv[1])
text = open(sys.argv[2]).read()
blocks = re.findall(r'<!-- serve-test: expect (.*?) -->\s*```sh\n(.*?)```', text, re.S)
if not blocks or len(blocks) != text.count("<!-- serve-test"):
    sys.exit("FAIL docs/operations.md: malformed serve-test blocks")
for n, (want, cmd) in enumerate(blocks):
    open(f"{sys.argv[1]}/{n}.sh", "w").write(cmd)
    open(f"{sys.argv[1]}/{n}.want", "w").write(want)
PY
for f in "$tmp"/docs/*.sh; do
  want=$(cat "${f%.sh}.want")
  out=$(sed "s/127\.0\.0\.1:8080/127.0.0.1:$port/g; s/127\.0\.0\.1:9102/127.0.0.1:$mport/g" "$f" |
    PATH="$(dirname "$SLUICE"):$PATH" timeout 20 bash 2>&1)
  [[ "$out" == *"$want"* ]] && pass "docs/operations.md example $(basename "$f")" ||
    bad "docs/operations.md example $(basename "$f")" "expected '$want' in: $out"
done

# --public-status true: on the public listener too.
p3=$(free_port)
start public "$p3" --public-status true
s_pub=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$p3/status.json")
[ "$s_pub" = 200 ] && pass "--public-status true: on the public listener (200)" || bad "public" "$s_pub"

# With an admin listener the page is there, and not on the main one.
p2=$(free_port); a2=$(free_port)
start admin "$p2" --admin-listen 127.0.0.1:"$a2"
wait_port "$a2"
s_main=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$p2/status")
s_admin=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$a2/status")
j_admin=$(curl -s "http://127.0.0.1:$a2/status.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["store"]["status"])')
[ "$s_main" = 404 ] && [ "$s_admin" = 200 ] && [ "$j_admin" = up ] &&
  pass "with --admin-listen: on the admin listener (200), not the main one (404)" ||
  bad "admin" "main $s_main, admin $s_admin, json $j_admin"

# ---- a real browser ----
chromium=$(command -v chromium || true)
if [ -z "$chromium" ] || [ ! -d "$SOURCE_DIR/tests/status/node_modules" ]; then
  bad "browser" "chromium or tests/status/node_modules missing (scripts/deps.sh --test installs them)"
  exit 1
fi
port=$(free_port); mport=$(free_port)
start browser "$port" --metrics-listen 127.0.0.1:"$mport" --state-file "$tmp/state"
wait_port "$mport"
# A save with a key in it (SIGUSR1), for the page's state file section.
check "http://127.0.0.1:$port" saved-user >/dev/null
kill -USR1 "${pids[-1]}"
for _ in $(seq 200); do
  curl -s "http://127.0.0.1:$mport/status.json" | grep -q '"saves_ok": *1' && break
  sleep 0.05
done
HOME="$tmp" node "$SOURCE_DIR/tests/status/status.js" "$chromium" "http://127.0.0.1:$mport" \
  "http://127.0.0.1:$port" "$tmp/status.png" || fail=1

exit $fail
