#!/bin/bash
# Integration test of what bounds `sluice serve`'s resources (issue 17):
# the ad hoc limits of the client-side API (an LRU cache whose evictions
# change no decision), the hits one increment may report, /metrics'
# per-value series (a total cap, idle expiry, every rule its own series)
# and its label values (length-capped, valid UTF-8, escaped), and the
# connections (RLIMIT_NOFILE at start, --max-connections-per-address).
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
rules="$SOURCE_DIR/tests/serve/resources.yaml"

# start NAME [FLAGS...]: sets PID and PORT; the log is $tmp/NAME.log.
start() {
  local name=$1
  shift
  "$SLUICE" serve --rules "$rules" --listen 127.0.0.1:0 --threads 2 \
    --public-metrics true "$@" 2>"$tmp/$name.log" &
  PID=$!
  pids+=("$PID")
  PORT=""
  for _ in $(seq 200); do
    PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
    [ -n "$PORT" ] && return 0
    sleep 0.05
  done
  echo "FAIL start $name: no 'listening on' line"; cat "$tmp/$name.log"; exit 1
}

# call METHOD PATH [BODY]: sets STATUS and BODY.
call() {
  local data=()
  [ $# -ge 3 ] && data=(--data-binary "$3")
  STATUS=$(curl -s -m 5 -X "$1" -o "$tmp/body" -w '%{http_code}' "${data[@]}" "http://127.0.0.1:$PORT$2")
  BODY=$(cat "$tmp/body" 2>/dev/null)
}

# expect NAME STATUS [TEXT]: the last call's status, and text in the body.
expect() {
  if [ "$STATUS" != "$2" ]; then
    bad "$1" "status $STATUS, expected $2; body: $BODY"
  elif [ $# -ge 3 ] && [[ "$BODY" != *"$3"* ]]; then
    bad "$1" "body lacks '$3': $BODY"
  else
    pass "$1"
  fi
}

check() { # check KEY VALUE: one /v1/check of domain res
  call POST /v1/check "{\"domain\": \"res\", \"descriptors\": [{\"entries\": [{\"key\": \"$1\", \"value\": \"$2\"}]}]}"
}

# stop NAME: SIGTERM, and the daemon exits 0 (under ASan: no leak).
stop() {
  kill -TERM "$PID"; wait "$PID"
  local st=$?
  [ "$st" = 0 ] && pass "$1 daemon exits 0" || bad "$1 daemon exit" "$st: $(tail -c 2000 "$tmp/$1.log")"
}

scrape() { curl -s -m 5 "http://127.0.0.1:$PORT/metrics" >"$tmp/metrics"; }

start main --max-adhoc-limits 2

# ---- Ad hoc limits: an LRU cache, not a cap that refuses (item 3) ----
a='"interval": "1h", "requests": 2'
call POST /v1/increment "{\"id\": \"a\", $a, \"hits\": 2}"; expect "adhoc: a used up" 200 '"remaining":0'
call GET '/v1/delay?id=b&interval=1h&requests=2'; expect "adhoc: b" 200
call GET '/v1/delay?id=c&interval=1h&requests=2'; expect "adhoc: c, past the cache: a evicted, not refused" 200 '"remaining":2'
for i in $(seq 1 20); do call GET "/v1/delay?id=n$i&interval=1h&requests=2"; [ "$STATUS" = 200 ] || break; done
expect "adhoc: 20 more new ids all answered" 200 '"remaining":2'
call GET '/v1/delay?id=a&interval=1h&requests=2'; expect "adhoc: a made again finds its counter (no decision changed)" 200 '"remaining":0'
[[ "$BODY" != *'"delay_ms":0,'* ]] && pass "adhoc: a still has to wait" || bad "adhoc: a's delay" "$BODY"

# ---- hits per increment: at most the capacity or max_hits (item 5) ----
call POST /v1/increment "{\"id\": \"big\", $a, \"hits\": 1099511627776}"
expect "increment: 2^40 hits refused" 400 '"code":"ERANGE","message":"hits: 1099511627776 is more than 2'
call GET '/v1/delay?id=big&interval=1h&requests=2'; expect "increment: a refused one records nothing" 200 '"delay_ms":0,'
call POST /v1/increment "{\"id\": \"big\", $a, \"hits\": 2}"; expect "increment: the capacity is accepted" 200 '"over_limit":false'
call POST /v1/increment "{\"id\": \"big\", $a, \"hits\": 2}"; expect "increment: over the limit, counted" 200 '"counted":true,"over_limit":true'
inc() { call POST /v1/increment "{\"domain\": \"res\", \"entries\": [{\"key\": \"$1\", \"value\": \"$2\"}], \"hits\": $3}"; }
inc user u1 6; expect "increment: rule's capacity (5) bounds hits" 400 '"message":"hits: 6 is more than 5'
inc user u1 5; expect "increment: rule's capacity accepted" 200 '"over_limit":false'
inc batch b1 11; expect "increment: max_hits bounds hits" 400 '"message":"hits: 11 is more than 10'
inc batch b1 10; expect "increment: max_hits above the capacity accepted, over the limit" 200 '"counted":true,"over_limit":true'
inc bucket k1 9; expect "increment: a bucket's burst bounds hits" 400 '"message":"hits: 9 is more than 8'
call POST /v1/increment '{"id": "per_user", "hits": 6}'; expect "increment: by name, the rule's capacity" 400 '"code":"ERANGE"'

# ---- Label values: capped, valid UTF-8, escaped (item 2) ----
# valid_metrics FILE: the scrape is UTF-8 and every sample line is one
# of the text format, labels escaped, no line longer than 1 KB.
valid_metrics() {
  python3 - "$1" <<'PY'
import re, sys
data = open(sys.argv[1], 'rb').read()
try:
    text = data.decode('utf-8')
except UnicodeDecodeError as e:
    sys.exit(f"not UTF-8: {e}")
label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
sample = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*(\{' + label + r'(?:,' + label + r')*\})? \S+')
for line in text.split('\n'):
    if line == '' or line.startswith('#'):
        continue
    if len(line) > 1024:
        sys.exit(f"a line of {len(line)} bytes: {line[:120]}...")
    if not sample.fullmatch(line):
        sys.exit(f"not a sample line: {line[:200]!r}")
PY
}
long=$(head -c 60000 /dev/zero | tr '\0' v)
check shadow "$long"; expect "label: a 60 KB shadow value is allowed" 200 '"overall":"OK"'
check shadow "${long}w"; expect "label: another 60 KB value" 200
call POST /v1/check '{"domain": "res", "descriptors": [{"entries": [{"key": "shadow", "value": "q\"b\\\\s\nn"}]}]}'
expect "label: a value with quote, backslash and newline" 200
printf 'GET /v1/auth?domain=res HTTP/1.1\r\nHost: x\r\nSluice-Descriptor: shadow=bad\xff\xfe\xc3(end\r\nConnection: close\r\n\r\n' >"$tmp/raw"
python3 -c 'import socket,sys; s=socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(open(sys.argv[2],"rb").read()); print(s.recv(100).split(b"\r\n")[0].decode())' "$PORT" "$tmp/raw" >"$tmp/rawst"
grep -q ' 204' "$tmp/rawst" && pass "label: invalid UTF-8 in a header value is decided" || bad "label: invalid UTF-8 decided" "$(cat "$tmp/rawst")"
scrape
out=$(valid_metrics "$tmp/metrics" 2>&1) && pass "label: /metrics is valid UTF-8 text format, no line over 1 KB" || bad "label: /metrics valid" "$out"
n=$(grep -c '^sluice_rule_hits_total{domain="res",rule="trial",descriptor="shadow_vvvv[^"]*…[0-9a-f]\{16\}"} 1$' "$tmp/metrics")
[ "$n" = 2 ] && pass "label: two long values, two series cut with distinct hashes" || bad "label: long values" "$(grep -a '^sluice_rule_hits_total' "$tmp/metrics" | cut -c1-300)"
grep -qF 'descriptor="shadow_q\"b\\\\s\nn"} 1' "$tmp/metrics" && pass "label: quote, backslash, newline escaped" || bad "label: escaped" "$(grep -a '^sluice_rule_hits_total' "$tmp/metrics" | cut -c1-300)"
grep -qF 'descriptor="shadow_bad���(end"} 1' "$tmp/metrics" && pass "label: invalid bytes as U+FFFD" || bad "label: U+FFFD" "$(grep -a '^sluice_rule_hits_total' "$tmp/metrics" | cut -c1-300)"

# ---- Series: every rule its own; per-value ones capped in total (item 1) ----
# 10048 values of a detailed_metric rule on one connection (one thread),
# then rules first seen now: each has its own series.
python3 - "$PORT" <<'PY' >"$tmp/bulk"
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
def check(descs):
    c.request("POST", "/v1/check", json.dumps({"domain": "res", "descriptors": descs}))
    r = c.getresponse(); r.read()
    return r.status
bad = 0
for i in range(157):
    bad += check([{"entries": [{"key": "tenant", "value": f"t{i}_{j}"}]} for j in range(64)]) != 200
for i in range(1, 9):
    bad += check([{"entries": [{"key": f"plain{i}", "value": "x"}]}]) != 200
print(bad)
PY
[ "$(cat "$tmp/bulk")" = 0 ] && pass "series: 10048 values checked" || bad "series: bulk" "$(cat "$tmp/bulk")"
scrape
for i in 1 8; do
  grep -q "^sluice_rule_hits_total{domain=\"res\",rule=\"plain$i\"} 1\$" "$tmp/metrics" &&
    pass "series: rule plain$i, first seen past the cap, has its own series" || bad "series: plain$i" "$(grep -a '^sluice_rule_hits_total' "$tmp/metrics" | grep -v tenant)"
done
n=$(grep -c '^sluice_rule_hits_total{domain="res",rule="res.tenant",descriptor="tenant_' "$tmp/metrics")
[ "$n" -le 10000 ] && [ "$n" -ge 9000 ] && pass "series: per-value series at most --max-metric-series (10000): $n" || bad "series: per-value count" "$n"
o=$(grep '^sluice_rule_hits_total{domain="res",rule="res.tenant",descriptor="_overflow_"}' "$tmp/metrics" | awk '{print $2}')
[ "$((n + ${o:-0}))" = 10048 ] && pass "series: the rest under the rule's descriptor=\"_overflow_\"" || bad "series: overflow" "n=$n overflow=$o"
stop main

# A total cap over threads.
start series --max-metric-series 2 --threads 2
for v in e1 e2 e3; do check tenant "$v"; done
scrape
n=$(grep -c '^sluice_rule_hits_total{domain="res",rule="res.tenant",descriptor="tenant_e' "$tmp/metrics")
[ "$n" = 2 ] && pass "series: --max-metric-series 2 over both threads" || bad "series: total cap" "$(grep -a tenant "$tmp/metrics")"
grep -q '^sluice_rule_hits_total{domain="res",rule="res.tenant",descriptor="_overflow_"} 1$' "$tmp/metrics" &&
  pass "series: the third value under _overflow_" || bad "series: third" "$(grep -a tenant "$tmp/metrics")"
grep -q '^sluice_metric_series 2$' "$tmp/metrics" && pass "series: sluice_metric_series 2" || bad "series: gauge" "$(grep -a '^sluice_metric_series' "$tmp/metrics")"
stop series

# Idle series leave (--metric-series-idle) and free their places.  Only
# what must hold however slow the machine is asserted: after sleeping
# past the idle time every per-value series is gone, and values seen
# then never overflow (were the places not freed, they would).
start idle --max-metric-series 2 --metric-series-idle 1s --threads 2
for v in e1 e2; do check tenant "$v"; done
check plain1 x
sleep 1.5 # past --metric-series-idle: the next scrape drops the idle ones
scrape
! grep -q 'descriptor="tenant_e' "$tmp/metrics" && pass "series: idle per-value series dropped" || bad "series: idle dropped" "$(grep -a tenant "$tmp/metrics")"
grep -q '^sluice_metric_series 0$' "$tmp/metrics" && pass "series: sluice_metric_series back to 0" || bad "series: gauge 0" "$(grep -a '^sluice_metric_series' "$tmp/metrics")"
grep -q '^sluice_rule_hits_total{domain="res",rule="plain1"} 1$' "$tmp/metrics" && pass "series: a rule's series never expires" || bad "series: rule kept" "$(grep -a plain1 "$tmp/metrics")"
for v in f1 f2; do check tenant "$v"; done
scrape
! grep -q 'descriptor="_overflow_"' "$tmp/metrics" && pass "series: the places of dropped series are free again" || bad "series: places freed" "$(grep -a tenant "$tmp/metrics")"
stop idle

# ---- Connections: RLIMIT_NOFILE and a cap per address (item 4) ----
# A soft limit of 256 is raised at start to what --max-connections needs,
# and 600 connections are all served.
(ulimit -Sn 256 && start nofile --max-connections 1000 && echo "$PID $PORT" >"$tmp/nofile.pid"; wait "$PID") &
sub=$!
for _ in $(seq 100); do [ -s "$tmp/nofile.pid" ] && break; sleep 0.05; done
read -r PID PORT <"$tmp/nofile.pid"
pids+=("$PID")
soft=$(awk '/Max open files/ {print $4}' "/proc/$PID/limits")
[ "${soft:-0}" -ge 1000 ] && pass "nofile: soft RLIMIT_NOFILE 256 raised to $soft" || bad "nofile: raised" "soft $soft"
python3 - "$PORT" <<'PY' && pass "nofile: 600 connections at once all served" || bad "nofile: 600 connections" "see above"
import socket, sys
port = int(sys.argv[1])
conns = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(600)]
for c in conns:
    c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
ok = sum(c.recv(100).startswith(b"HTTP/1.1 200") for c in conns)
print("served", ok)
sys.exit(0 if ok == 600 else 1)
PY
kill -TERM "$PID"; wait "$sub" # the subshell's status is the daemon's
st=$?
[ "$st" = 0 ] && pass "nofile daemon exits 0" || bad "nofile daemon exit" "$st: $(tail -c 2000 "$tmp/nofile.log")"
# A hard limit below the need is refused at start, naming the numbers.
(ulimit -n 512 && exec timeout 10 "$SLUICE" serve --rules "$rules" --listen 127.0.0.1:0 --threads 2 --max-connections 1000) 2>"$tmp/hard.log" </dev/null
st=$?
[ "$st" != 0 ] && grep -q 'max-connections 1000 needs [0-9]* file descriptors.*hard RLIMIT_NOFILE is 512' "$tmp/hard.log" &&
  pass "nofile: a hard limit too low refused: $(head -c 160 "$tmp/hard.log")" || bad "nofile: hard limit" "exit $st: $(cat "$tmp/hard.log")"

# --max-connections-per-address 2: a third connection from 127.0.0.1 is
# closed at once; 127.0.0.2 still gets in; a closed one frees its place.
start peraddr --max-connections-per-address 2
python3 - "$PORT" <<'PY' || fail=1
import socket, sys, time
port = int(sys.argv[1])
def conn(src="127.0.0.1"):
    s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(src, 0))
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        return s, s.recv(1000)
    except ConnectionResetError:
        return s, b""
ok = lambda r: r.startswith(b"HTTP/1.1 200")
a, ra = conn(); b, rb = conn()
c, rc = conn()
d, rd = conn("127.0.0.2")
a.close()
for _ in range(100):  # until the server has seen a go (at most 5 s)
    e, re_ = conn()
    if ok(re_):
        break
    e.close(); time.sleep(0.05)
res = [("two from one address", ok(ra) and ok(rb)), ("the third closed", rc == b""),
       ("another address served", ok(rd)), ("a closed one frees its place", ok(re_))]
for name, good in res:
    print(("PASS" if good else "FAIL") + " per address: " + name + ("" if good else ": %r" % [ra, rb, rc, rd, re_]))
sys.exit(0 if all(g for _, g in res) else 1)
PY
scrape
grep -q '^sluice_connections_closed_at_accept_total{cap="per_address"} [1-9]' "$tmp/metrics" &&
  pass "per address: counted in sluice_connections_closed_at_accept_total" || bad "per address: counted" "$(grep -a closed_at_accept "$tmp/metrics")"
stop peraddr

# sluice proxy: the same at its accept (sv_accept) and start.
(ulimit -Sn 256 && exec "$SLUICE" proxy --rules "$SOURCE_DIR/examples/proxy/rules.yaml" \
  --upstream http://127.0.0.1:1 --listen 127.0.0.1:0 --threads 2 --max-connections 1000 \
  --max-connections-per-address 1) 2>"$tmp/proxy.log" &
PID=$!
pids+=("$PID")
PORT=""
for _ in $(seq 200); do
  PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/proxy.log")
  [ -n "$PORT" ] && break
  sleep 0.05
done
soft=$(awk '/Max open files/ {print $4}' "/proc/$PID/limits")
[ "${soft:-0}" -ge 1000 ] && pass "proxy: soft RLIMIT_NOFILE 256 raised to $soft" || bad "proxy: nofile raised" "soft $soft; $(cat "$tmp/proxy.log")"
python3 - "$PORT" <<'PY' || fail=1
import socket, sys
port = int(sys.argv[1])
def conn():
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        # Answered by the proxy itself: 502, its upstream is port 1.
        s.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
        return s, s.recv(100)
    except ConnectionResetError:
        return s, b""
a, ra = conn()
b, rb = conn()
good = ra.startswith(b"HTTP/1.1 502") and rb == b""
print(("PASS" if good else "FAIL") + " proxy: --max-connections-per-address 1 closes the second" + ("" if good else ": %r %r" % (ra, rb)))
sys.exit(0 if good else 1)
PY
stop proxy

exit $fail
