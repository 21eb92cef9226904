#!/bin/bash
# Integration test of `sluice advisor` (docs/advisor.md): a real
# `sluice serve` under a seasonal load (a square wave: 10 r/s for half of
# each 4 s season, 150 r/s for the other half, on a rule of 100/s), the
# advisor scraping it every 200 ms, and its answers read as a poller
# would: valid sluice-advisor/1 JSON, nothing before two seasons, a
# recommendation above the base limit before each forecast peak, 304 to
# If-None-Match, and a dead, hanging or garbage-answering node survived.
# About 35 s.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$SOURCE_DIR/tests/sh/common.sh"

# port_of LOG WHO: the port a "WHO: listening on 127.0.0.1:PORT" line names.
port_of() {
  local p=""
  for _ in $(seq 200); do
    p=$(sed -n "s/^$2:\{0,1\} listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p" "$1")
    [ -n "$p" ] && { echo "$p"; return 0; }
    sleep 0.05
  done
  echo "FAIL $2 did not start: $(cat "$1")" >&2
  exit 1
}

# Rule ids: 'dup' is the name of a rule in each domain, so the second is
# dup#2; 'twin' names two rules of one domain, which share one series and
# so are not advised.
mkdir "$tmp/rules"
cat >"$tmp/rules/a.yaml" <<'EOF'
domain: lab
descriptors:
  - key: generic_key
    value: global
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: ip
    rate_limit: {name: dup, unit: second, requests_per_unit: 5}
  - key: user
    rate_limit: {name: twin, unit: second, requests_per_unit: 5}
  - key: team
    rate_limit: {name: twin, unit: second, requests_per_unit: 10}
EOF
cat >"$tmp/rules/b.yaml" <<'EOF'
domain: other
descriptors:
  - key: team
    rate_limit: {name: dup, unit: second, requests_per_unit: 10}
EOF

"$SLUICE" serve --rules "$tmp/rules" --listen 127.0.0.1:0 --threads 2 \
  --metrics-listen 127.0.0.1:0 2>"$tmp/serve.log" &
SERVE=$!
pids+=("$SERVE")
PORT=$(port_of "$tmp/serve.log" sluice) || exit 1
MPORT=$(port_of "$tmp/serve.log" "sluice: metrics") || exit 1 # what the advisor scrapes

# The load and the poller, one python process: the load's clock gives the
# phase of each poll.  Season 4 s: phase < 0.5 is 10 r/s, >= 0.5 150 r/s,
# on lab.generic_key_global; the second 'dup' rule (id dup#2) and a
# 'twin' get a steady 30 r/s each.  Each poll is one line: t phase status etag recs-json.
cat >"$tmp/load.py" <<'EOF'
import http.client, json, sys, threading, time
port, aport_file, out, season, duration = sys.argv[1], sys.argv[2], sys.argv[3], 4.0, 26.0
t0 = time.monotonic()
def body(domain, key, value):
    return json.dumps({"domain": domain, "descriptors": [{"entries": [{"key": key, "value": value}]}]})
def drive(domain, key, value, rate_of):
    c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=5)
    b, nxt = body(domain, key, value), time.monotonic()
    while time.monotonic() - t0 < duration:
        c.request("POST", "/v1/check", b, {"Content-Type": "application/json"})
        c.getresponse().read()
        nxt += 1.0 / rate_of(((time.monotonic() - t0) % season) / season)
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
        elif d < -0.5:
            nxt = time.monotonic()  # fell behind: no burst to catch up
loads = [threading.Thread(target=drive, args=("lab", "generic_key", "global", lambda ph: 10 if ph < 0.5 else 150)),
         threading.Thread(target=drive, args=("other", "team", "t1", lambda ph: 30)),
         threading.Thread(target=drive, args=("lab", "team", "t1", lambda ph: 30))]
for th in loads:
    th.start()
open(out + ".started", "w").write("%f" % (time.time() - (time.monotonic() - t0)))
aport = None
with open(out, "w") as f:
    while loads[0].is_alive():
        time.sleep(0.05)
        if aport is None:
            try:
                aport = int(open(aport_file).read())
            except (OSError, ValueError):
                continue
        t = time.monotonic() - t0
        try:
            c = http.client.HTTPConnection("127.0.0.1", aport, timeout=2)
            c.request("GET", "/v1/recommendations?rules_version=x")
            r = c.getresponse()
            text = r.read().decode()
            f.write("%.3f %.3f %d %s %s\n" % (t, (t % season) / season, r.status,
                    r.getheader("ETag"), text))
        except Exception as e:
            f.write("%.3f %.3f 0 - %r\n" % (t, (t % season) / season, str(e)))
for th in loads:
    th.join()
EOF
python3 "$tmp/load.py" "$PORT" "$tmp/aport" "$tmp/polls" &
LOAD=$!
pids+=("$LOAD")
for _ in $(seq 100); do [ -f "$tmp/polls.started" ] && break; sleep 0.05; done
sleep 0.5 # the advisor starts on a running load, as it would in production

adv_wall=$(date +%s.%N) # when the advisor starts, on the load's clock below
"$SLUICE" advisor --scrape "http://127.0.0.1:$MPORT" --listen 127.0.0.1:0 \
  --step 200ms --season 4s --horizon 600ms 2>"$tmp/advisor.log" &
ADV=$!
pids+=("$ADV")
APORT=$(port_of "$tmp/advisor.log" "sluice advisor") || exit 1
echo "$APORT" >"$tmp/aport"
adv_start=$(python3 -c "print($adv_wall - float(open('$tmp/polls.started').read()))")

# While the load runs: the endpoints besides the answer.
code=$(curl -s -m 5 -o "$tmp/b" -w '%{http_code}' "http://127.0.0.1:$APORT/other")
[ "$code" = 404 ] && grep -q '"code":"ENOTFOUND"' "$tmp/b" && pass "404 JSON" ||
  bad "404" "$code $(cat "$tmp/b")"
code=$(curl -s -m 5 -o "$tmp/b" -w '%{http_code}' -X POST "http://127.0.0.1:$APORT/v1/recommendations")
[ "$code" = 405 ] && pass "405 for POST" || bad "405" "$code $(cat "$tmp/b")"

wait "$LOAD" || bad "load" "the load generator failed"

# Every answer strict sluice-advisor/1; then the figures.
python3 - "$tmp/polls" "$adv_start" >"$tmp/verdict" <<'EOF'
import json, sys
polls, adv_start, season, base = sys.argv[1], float(sys.argv[2]), 4.0, 100
rows, bad = [], []
for line in open(polls):
    t, ph, status, etag, text = line.rstrip("\n").split(" ", 4)
    t, ph = float(t), float(ph)
    if status != "200":
        bad.append("status %s at %.2f: %s" % (status, t, text)); continue
    a = json.loads(text)
    ok = (a.get("protocol") == "sluice-advisor/1" and isinstance(a.get("computed_at_ms"), int)
          and a.get("valid_for_ms") == 1000 and isinstance(a.get("recommendations"), list)
          and etag == '"%d"' % a["computed_at_ms"])
    recs = {}
    for r in a["recommendations"]:
        ok &= (isinstance(r.get("limit"), str) and isinstance(r.get("requests_per_unit"), int)
               and 0 <= r["requests_per_unit"] <= 2**40 and r.get("reason") == "forecast"
               and isinstance(r["forecast"]["at_ms"], int) and r["forecast"]["at_ms"] > a["computed_at_ms"]
               and r["forecast"]["upper"] >= r["forecast"]["yhat"] and r["limit"] not in recs)
        recs[r["limit"]] = r["requests_per_unit"]
    if not ok:
        bad.append("invalid answer at %.2f: %s" % (t, text))
    rows.append((t, ph, recs))
print("answers: %d polls, %d bad" % (len(rows), len(bad)))
for b in bad[:5]:
    print("BAD " + b)
ready = adv_start + 2 * season
early = [r for r in rows if r[0] < ready - 1.0 and r[2]]  # a slow scrape may count for two steps
print("early: %d answers with recommendations before two seasons (advisor "
      "started at %.2f s, ready at %.2f s): %s" % (len(early), adv_start, ready,
      " ".join("%.2f" % r[0] for r in early[:5])))
late = [r for r in rows if r[0] >= ready + season]  # scored from season 4
def top(lo, hi):
    v = [r[2].get("lab.generic_key_global", 0) for r in late if lo <= r[1] < hi]
    return max(v) if v else -1
quiet, before_peak, peak = top(0.05, 0.30), top(0.38, 0.50), top(0.60, 0.95)
print("global: highest recommendation at phase .05-.30 (quiet) %d, .38-.50 (quiet, "
      "peak within the horizon) %d, .60-.95 (peak) %d; base %d" % (quiet, before_peak, peak, base))
ids = sorted({k for r in late for k in r[2]})
print("ids recommended: %s" % ids)
ok = (not bad and not early and before_peak > base and before_peak > quiet
      and peak > base and ids == ["dup#2", "lab.generic_key_global"])
print("VERDICT " + ("ok" if ok else "failed"))
EOF
cat "$tmp/verdict"
grep -q '^VERDICT ok' "$tmp/verdict" && pass "recommendations rise before the forecast peak" ||
  bad "recommendations" "see the figures above; advisor log: $(cat "$tmp/advisor.log")"

# If-None-Match with the current ETag: 304, no body (the answer changes
# each step, so a few tries); another ETag: 200.
got304=""
for _ in $(seq 20); do
  etag=$(curl -s -m 5 -D - -o /dev/null "http://127.0.0.1:$APORT/v1/recommendations" |
    sed -n 's/^ETag: *//Ip' | tr -d '\r')
  rm -f "$tmp/b"
  code=$(curl -s -m 5 -o "$tmp/b" -w '%{http_code}' -H "If-None-Match: $etag" \
    "http://127.0.0.1:$APORT/v1/recommendations")
  [ "$code" = 304 ] && [ -s "$tmp/b" ] && bad "304 has a body" "$(cat "$tmp/b")"
  [ "$code" = 304 ] && [ ! -s "$tmp/b" ] && { got304=1; break; }
done
[ -n "$got304" ] && pass "304 for If-None-Match $etag" || bad "304" "last $code for $etag"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'If-None-Match: "1"' \
  "http://127.0.0.1:$APORT/v1/recommendations")
[ "$code" = 200 ] && pass "200 for another ETag" || bad "200 for another ETag" "$code"

# The node dies: the last answer stays until it expires (valid_for_ms
# 1000), then there are none; the advisor lives on.  Killed while the
# load (a steady one now) has the dup#2 rule recommended.
python3 - "$PORT" <<'EOF' &
import http.client, json, sys, time
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=5)
b = json.dumps({"domain": "other", "descriptors": [{"entries": [{"key": "team", "value": "t1"}]}]})
end = time.monotonic() + 30
while time.monotonic() < end:
    try:
        c.request("POST", "/v1/check", b); c.getresponse().read()
    except Exception:
        break
    time.sleep(1 / 30)
EOF
pids+=("$!")
has_recs() { curl -s -m 5 "http://127.0.0.1:$APORT/v1/recommendations" | grep -q '"dup#2"'; }
for _ in $(seq 100); do has_recs && break; sleep 0.1; done
kill -9 "$SERVE"
sleep 0.3
has_recs && pass "dead node: the last recommendations stay" ||
  bad "dead node" "recommendations gone at once: $(curl -s "http://127.0.0.1:$APORT/v1/recommendations")"
sleep 1.5
body=$(curl -s -m 5 "http://127.0.0.1:$APORT/v1/recommendations")
[[ "$body" == *'"recommendations":[]'* ]] && pass "dead node: expired to none" ||
  bad "dead node expiry" "$body"
grep -q 'scrape http://127.0.0.1:[0-9]*/metrics: connect' "$tmp/advisor.log" &&
  pass "dead node logged" || bad "dead node log" "$(cat "$tmp/advisor.log")"
kill -0 "$ADV" && pass "advisor survives a dead node" || bad "advisor died" ""
kill -TERM "$ADV"; wait "$ADV"; st=$?
# (Its log is shown on failure: a sanitizer's report ends up there.)
[ "$st" = 0 ] && pass "advisor exits 0 on SIGTERM" ||
  bad "advisor exit" "$st; its log: $(cat "$tmp/advisor.log")"

# Garbage and silence: one node answers junk, another never answers.
cat >"$tmp/junk.py" <<'EOF'
import socket, sys, threading, time
def junk(s):
    while True:
        c, _ = s.accept()
        c.recv(4096)
        body = b"sluice_rule_hits_total{ 12 x\n"
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        c.close()
def hang(s):
    held = []
    while True:
        held.append(s.accept()[0])
ports = []
for fn in (junk, hang):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
    ports.append(s.getsockname()[1])
    threading.Thread(target=fn, args=(s,), daemon=True).start()
print(*ports, flush=True)
time.sleep(60)
EOF
python3 "$tmp/junk.py" >"$tmp/junk.ports" &
pids+=("$!")
for _ in $(seq 100); do [ -s "$tmp/junk.ports" ] && break; sleep 0.05; done
read -r JUNK HANG <"$tmp/junk.ports"
for target in "$JUNK" "$HANG"; do
  "$SLUICE" advisor --scrape "127.0.0.1:$target" --listen 127.0.0.1:0 \
    --step 200ms --season 1s --horizon 200ms 2>"$tmp/adv-$target.log" &
  A=$!
  pids+=("$A")
  AP=$(port_of "$tmp/adv-$target.log" "sluice advisor") || exit 1
  sleep 1.2
  t0=$(date +%s%N)
  body=$(curl -s -m 5 "http://127.0.0.1:$AP/v1/recommendations")
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if [[ "$body" == *'"protocol":"sluice-advisor/1"'*'"recommendations":[]'* ]] && [ "$ms" -lt 500 ]; then
    pass "node $target (junk or silent): an empty answer in ${ms}ms"
  else
    bad "node $target" "${ms}ms: $body"
  fi
  kill -0 "$A" && pass "advisor survives node $target" || bad "advisor died on $target" ""
  kill -TERM "$A"; wait "$A"; st=$?
  [ "$st" = 0 ] || bad "advisor exit ($target)" "$st; its log: $(cat "$tmp/adv-$target.log")"
done
# Slow clients: 64 connections from one address trickling a byte every
# 2 s (a slowloris) while polls come from another address: each poll is
# answered at once, that address holds at most 16 connections (the rest
# are closed at once), and a trickled request is cut at the 3 s read
# timeout with a 408.
"$SLUICE" advisor --scrape "127.0.0.1:$JUNK" --listen 127.0.0.1:0 \
  --step 200ms --season 1s --horizon 200ms 2>"$tmp/adv-slow.log" &
A=$!
pids+=("$A")
AP=$(port_of "$tmp/adv-slow.log" "sluice advisor") || exit 1
cat >"$tmp/slow.py" <<'EOF'
import socket, sys, threading, time
port = int(sys.argv[1])
stop = time.monotonic() + 12
fate = {"refused": 0, "cut": 0, "other": 0}
lock = threading.Lock()
def trickle():
    s = socket.create_connection(("127.0.0.1", port), 3)
    s.settimeout(0.2)
    end = "other"
    for b in b"GET /v1/recommendations HTTP/1.1\r\nHost: a\r\n\r\n":
        if time.monotonic() > stop:
            break
        try:
            s.sendall(bytes([b]))
            got = s.recv(4096)
            end = "cut" if got.startswith(b"HTTP/1.1 408") else "refused" if got == b"" else "other"
            break
        except socket.timeout:
            time.sleep(1.8)
        except OSError:
            end = "refused"
            break
    with lock:
        fate[end] += 1
threads = [threading.Thread(target=trickle, daemon=True) for _ in range(64)]
for t in threads:
    t.start()
time.sleep(1)
worst, answered, polls = 0.0, 0, 0
while time.monotonic() < stop - 1:
    polls += 1
    t0 = time.monotonic()
    try:
        c = socket.socket()
        c.bind(("127.0.0.2", 0))
        c.settimeout(2)
        c.connect(("127.0.0.1", port))
        c.sendall(b"GET /v1/recommendations HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        got = b""
        while True:
            b = c.recv(65536)
            if not b:
                break
            got += b
        if got.startswith(b"HTTP/1.1 200"):
            answered += 1
            worst = max(worst, time.monotonic() - t0)
        c.close()
    except OSError:
        pass
    time.sleep(0.5)
for t in threads:
    t.join(5)
print(polls, answered, "%.3f" % worst, fate["refused"], fate["cut"], fate["other"])
EOF
read -r polls answered worst refused cut other < <(python3 "$tmp/slow.py" "$AP")
if [ "${polls:-0}" -ge 15 ] && [ "$answered" = "$polls" ] &&
   python3 -c "import sys; sys.exit(not $worst < 1.0)"; then
  pass "64 slow clients: every poll from another address answered ($answered of $polls, worst ${worst}s)"
else
  bad "slow clients: polls" "$polls polls, $answered answered, worst $worst"
fi
[ "$refused" = 48 ] && [ "$cut" = 16 ] &&
  pass "one address: 16 slow connections held, then cut by a 408; 48 refused" ||
  bad "slow clients: per address" "refused $refused, cut $cut, other $other"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$AP/v1/recommendations")
[ "$code" = 200 ] && pass "after the slow clients, a poll from their address is answered" ||
  bad "after slow clients" "$code"
kill -TERM "$A"; wait "$A"; st=$?
[ "$st" = 0 ] || bad "advisor exit (slow)" "$st; its log: $(cat "$tmp/adv-slow.log")"

grep -q 'malformed series' "$tmp/adv-$JUNK.log" && pass "junk logged" ||
  bad "junk log" "$(cat "$tmp/adv-$JUNK.log")"
grep -q 'timed out' "$tmp/adv-$HANG.log" && pass "silence logged" ||
  bad "silence log" "$(cat "$tmp/adv-$HANG.log")"

exit $fail
