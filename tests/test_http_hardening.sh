#!/bin/bash
# HTTP hardening of `sluice serve` and `sluice proxy` (issue 17): the
# request rules of RFC 9112 that the system's http-parser lets through,
# answers that reach the client whole before a close (lingering close),
# one answer to an Upgrade, X-Forwarded-For sent as several fields,
# pipelined requests for large answers, and the proxy's metrics off its
# public listener.  Real servers on loopback ports, a raw-socket client
# (python3); the upstream logs every request it saw, so "nothing was
# forwarded" is checked, not assumed.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
tmp=$(mktemp -d)
pids=()
pids_paths=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
exec 2> >(grep -v 'Killed' >&2) # the trap's kills are not failures
source "$SOURCE_DIR/tests/sh/common.sh"
sanitized=0
grep -qaE '__(asan|tsan)_init' "$SLUICE" && sanitized=1

UP=$(free_port)
python3 "$SOURCE_DIR/tests/proxy/upstream.py" "$UP" "$tmp/upstream.log" &
pids+=($!)
wait_port "$UP"

# start NAME COMMAND ARGS...: sets PID and PORT (and METRICS when a
# metrics listener is printed); the log is $tmp/NAME.log.
start() {
  local name=$1
  shift
  "$SLUICE" "$@" --listen 127.0.0.1:0 2>"$tmp/$name.log" &
  PID=$!
  pids+=("$PID")
  PORT=""
  for _ in $(seq 200); do
    PORT=$(sed -n 's/.*: listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
    [ -n "$PORT" ] && break
    sleep 0.05
  done
  [ -n "$PORT" ] || { echo "FAIL start $name: no 'listening on' line"; cat "$tmp/$name.log"; exit 1; }
  METRICS=$(sed -n 's/.*metrics listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
}

start serve serve --rules "$SOURCE_DIR/examples/rules" --threads 1 --metrics-listen 127.0.0.1:0
SV=$PORT SVM=$METRICS SVPID=$PID
start proxy proxy --config "$SOURCE_DIR/examples/proxy/proxy.yaml" --upstream "http://127.0.0.1:$UP" --threads 1
PX=$PORT PXPID=$PID

# raw PORT BYTES: sends BYTES (with \r\n escapes) and prints everything
# read until the server closes, then "<eof>" or the error that ended it.
raw() {
  python3 - "$1" "$2" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
data, end = b"", "<eof>"
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
except OSError as e:
    end = "<%r>" % e
print(data.decode("latin-1") + end)
PY
}
seen() { grep -c -- "$1" "$tmp/upstream.log" 2>/dev/null || true; }
statuses() { grep -o '^HTTP/1\.1 [0-9]*' <<<"$1" | tr '\n' ' '; }

# RFC 9112's rules, on both servers: a 400 naming the problem, and
# nothing of the request reaches the proxy's upstream.
hygiene=(
  'Transfer-Encoding not ending in chunked|POST /files/te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc|Transfer-Encoding without chunked'
  'Transfer-Encoding chunked, then gzip|POST /files/te2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n3\r\nabc\r\n0\r\n\r\n|Transfer-Encoding without chunked'
  'whitespace before a header colon|GET /files/ws HTTP/1.1\r\nHost : x\r\nConnection: close\r\n\r\n|whitespace before a header'
  'a tab in the request target|GET /files/a\tb HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n|control character or whitespace in the request target'
)
for case in "${hygiene[@]}"; do
  IFS='|' read -r what bytes message <<<"$case"
  path=$(sed -n 's/^[A-Z]* \([^ \\]*\).*/\1/p' <<<"$bytes")
  for target in proxy serve; do
    port=$PX
    [ "$target" = serve ] && port=$SV
    out=$(raw "$port" "$bytes")
    if [[ "$out" == "HTTP/1.1 400 Bad Request"*'"code":"EHTTP"'*"$message"*'<eof>' ]] &&
      { [ "$target" = serve ] || [ "$(seen " $path ")" = 0 ]; }; then
      [ "$target" = serve ] && pass "serve: $what: 400 naming it" ||
        pass "proxy: $what: 400 naming it, the upstream saw nothing"
    else
      bad "$target: $what" "$(head -c 300 <<<"$out") (upstream saw $(seen " $path "))"
    fi
  done
done

# An Upgrade to serve: one answer (the request as HTTP/1.1), then the
# connection ends; the proxy refuses it (501) and ends it too.
out=$(raw "$SV" 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
[ "$(statuses "$out")" = "HTTP/1.1 200 " ] && [[ "$out" == *"Connection: close"*'<eof>' ]] &&
  pass "serve: an Upgrade gets one answer, then the close" || bad "serve upgrade" "$out"
out=$(raw "$PX" 'GET /files/up HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nGET /files/up2 HTTP/1.1\r\nHost: x\r\n\r\n')
[ "$(statuses "$out")" = "HTTP/1.1 501 " ] && [[ "$out" == *'<eof>' ]] && [ "$(seen /files/up)" = 0 ] &&
  pass "proxy: an Upgrade gets one 501, then the close" || bad "proxy upgrade" "$out"

# A 431 or 413 while the client is still sending: the answer arrives
# whole and the connection ends with a FIN after the rest was read and
# dropped (lingering close), not with a reset that can destroy it.
linger() { python3 "$SOURCE_DIR/tests/sh/linger.py" "$@"; }
big431='GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: '  # one header line of 8 MB
linger "$SV" 431 "$big431" $((8 << 20)) && pass "serve: 431 to a client still sending: whole, then a clean close" || bad "serve 431 linger" "see above"
linger "$SV" 413 'POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\n\r\n' $((8 << 20)) && pass "serve: 413 to a client still sending: whole, then a clean close" || bad "serve 413 linger" "see above"
linger "$PX" 431 "$big431" $((8 << 20)) && pass "proxy: 431 to a client still sending: whole, then a clean close" || bad "proxy 431 linger" "see above"

# X-Forwarded-For in two fields from a trusted peer (127.0.0.2 in the
# example config), as a load balancer that appends its own field sends
# it: one list, in order, for the limit's key and for the upstream.
out=$(curl -s -m 5 -o /dev/null -w '%{http_code}' --interface 127.0.0.2 \
  -H 'X-Forwarded-For: 192.0.2.66' -H 'X-Forwarded-For: 203.0.113.5' "http://127.0.0.1:$PX/api/xff2")
grep -q "/api/xff2 key=- xff=192.0.2.66,203.0.113.5,127.0.0.2 " "$tmp/upstream.log" && [ "$out" = 200 ] &&
  pass "proxy: X-Forwarded-For fields forwarded as one list, in order" ||
  bad "XFF forwarded" "$out $(grep /api/xff2 "$tmp/upstream.log")"

# serve's metrics: on --metrics-listen (with what a scraper reads), not
# on the decision API's listener unless --public-metrics says so.
out=$(curl -s -m 5 -w ' %{http_code}' "http://127.0.0.1:$SV/metrics")
[[ "$out" == *'"code":"ENOTFOUND"'*"--metrics-listen"*" 404" ]] &&
  pass "serve: no GET /metrics on the decision API's listener by default (404 says where)" || bad "serve public metrics" "$out"
codes=""
for path in /metrics /v1/rules /healthz /readyz /v1/check; do
  codes="$codes$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$SVM$path") "
done
m=$(curl -s -m 5 "http://127.0.0.1:$SVM/metrics")
[ "$codes" = "200 200 200 200 404 " ] && grep -q '^sluice_checks_total' <<<"$m" &&
  pass "serve: --metrics-listen answers /metrics, /v1/rules, /healthz, /readyz, nothing else" || bad "serve metrics listener" "$codes"
start servepub serve --rules "$SOURCE_DIR/examples/rules" --threads 1 --public-metrics true
m=$(curl -s -m 5 "http://127.0.0.1:$PORT/metrics")
grep -q '^sluice_checks_total' <<<"$m" &&
  pass "serve: --public-metrics true answers them on the decision API's listener" || bad "serve --public-metrics" "not answered"
kill -TERM "$PID"; wait "$PID" || bad "serve exit" "status $?"

# The proxy's metrics: not on its public listener unless metrics_path
# asks for them (the path is forwarded like any other), and on the
# metrics listener GET /metrics and /v1/rules (what sluice advisor
# scrapes) only.
start proxym proxy --config "$SOURCE_DIR/tests/proxy/timeouts.yaml" --rules "$SOURCE_DIR/examples/proxy/rules.yaml" \
  --upstream "http://127.0.0.1:$UP" --threads 1 --metrics-listen 127.0.0.1:0
PM=$PORT PMM=$METRICS PMPID=$PID
out=$(curl -s -m 5 "http://127.0.0.1:$PM/sluice/metrics")
[ "$out" = "upstream /sluice/metrics" ] && [ "$(curl -s -m 5 "http://127.0.0.1:$PM/metrics")" = "upstream /metrics" ] &&
  pass "proxy: no metrics on the public listener by default (the paths are forwarded)" || bad "public metrics" "$(head -c 200 <<<"$out")"
out=$(curl -s -m 5 "http://127.0.0.1:$PMM/metrics")
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PMM/api/x")
[[ "$out" == *"sluice_proxy_requests_total"* ]] && [ "$code" = 404 ] && [ "$(seen ' /api/x ')" = 0 ] &&
  pass "proxy: --metrics-listen answers GET /metrics, 404 otherwise, forwards nothing" || bad "metrics listener" "$code $(head -c 200 <<<"$out")"
out=$(curl -s -m 5 "http://127.0.0.1:$PMM/v1/rules")
python3 -c 'import json, sys; r = json.load(sys.stdin); sys.exit(0 if r["version"] and r["rules"] else 1)' <<<"$out" &&
  [ "$(seen ' /v1/rules ')" = 0 ] &&
  pass "proxy: the metrics listener answers GET /v1/rules (sluice advisor scrapes it)" || bad "metrics listener /v1/rules" "$(head -c 200 <<<"$out")"

# The proxy's metrics remain usable from the public listener when asked
# for (metrics_path), as the example config's trusted-proxy limit shows:
# the key is the last X-Forwarded-For field's last untrusted hop, not
# what the client wrote in the first field.
m=$(curl -s -m 5 "http://127.0.0.1:$(sed -n 's/.*metrics listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/proxy.log")/metrics")
grep -q 'descriptor="remote_address_203.0.113.5"' <<<"$m" && ! grep -q 'remote_address_192.0.2.66' <<<"$m" &&
  pass "proxy: the limit's key is the client of the combined X-Forwarded-For" ||
  bad "XFF key" "$(grep remote_address <<<"$m")"

# Pipelined requests for large answers the proxy makes itself (metrics,
# here opted in on the public listener, and 429s): memory stays bounded
# while the client does not read, and every answer comes once it does,
# then the close (the client ended its side after its requests).
# (Under sanitizers only the answers are checked: their allocators keep
# freed memory in quarantine, so resident size says nothing.)
printf 'metrics_path: /sluice/metrics\n' >"$tmp/public.yaml"
cat "$SOURCE_DIR/tests/proxy/timeouts.yaml" >>"$tmp/public.yaml"
start proxyp proxy --config "$tmp/public.yaml" --rules "$SOURCE_DIR/examples/proxy/rules.yaml" \
  --upstream "http://127.0.0.1:$UP" --threads 1
pipelined() { # pipelined PORT PID PATH N STATUS: N requests, the answers' STATUS
  python3 - "$@" "$sanitized" <<'PY'
import re, socket, sys, threading, time
port, pid, path, n, status, sanitized = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6] == "1"
def rss():
    return int(re.search(r"VmRSS:\s+(\d+)", open("/proc/%d/status" % pid).read()).group(1))
if sanitized:
    n //= 20  # only the answers are checked: fewer do
before = rss()
s = socket.create_connection(("127.0.0.1", port), timeout=30)
# Sent from a thread: a server that stops reading must not block this
# client from reading the answers afterwards.
req = ("GET %s HTTP/1.1\r\nHost: x\r\nX-Api-Key: pipe-%s\r\n\r\n" % (path, path)).encode()
def send():  # all of them, then the client's end: the answers still come
    s.sendall(req * n)
    s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send)
t.start()
time.sleep(2)
grown = rss() - before
# Counted as they come (a match never lies wholly in the 8 bytes kept).
answers, got, size, tail, end = 0, 0, 0, b"", "eof"
want = ("HTTP/1.1 %s " % status).encode()
while True:
    try:
        chunk = s.recv(1 << 20)
    except OSError as e:
        end = repr(e)
        break
    if not chunk:
        break
    size += len(chunk)
    answers += (tail + chunk).count(b"HTTP/1.1 ")
    got += (tail + chunk).count(want)
    tail = chunk[-8:]
t.join(10)
ok = (sanitized or grown < 16 * 1024) and answers == n and got >= n // 2 and end == "eof"
print("  %d pipelined GET %s unread: the proxy grew %d KiB, then answered %d (%d with %s; %d MB), "
      "then %s" % (n, path, grown, answers, got, status, size >> 20, end))
sys.exit(0 if ok else 1)
PY
}
pipelined "$PORT" "$PID" /sluice/metrics 20000 200 &&
  pass "proxy: 20000 pipelined GET /sluice/metrics unread: memory bounded, all answered" || bad "pipelined metrics" "see above"
pipelined "$PMM" "$PMPID" /metrics 20000 200 &&
  pass "proxy: the same on the metrics listener" || bad "pipelined metrics listener" "see above"

# docs/proxy.md's table of what a route `prefix: /api/` matches in each
# mode: a route whose limit refuses everything (429) against one that
# forwards (200), and 400 for a target refused.
printf 'domain: paths\ndescriptors:\n  - key: generic_key\n    value: all\n    rate_limit: {unit: minute, requests_per_unit: 0}\n' >"$tmp/paths_rules.yaml"
modes=(normalized case_sensitive rfc3986)
mports=()
for m in "${modes[@]}"; do
  printf 'routes:\n  - prefix: /api/\n    domain: paths\n    match: %s\n    descriptors:\n      - - generic_key: {value: all}\n' "$m" >"$tmp/paths_$m.yaml"
  start "paths_$m" proxy --config "$tmp/paths_$m.yaml" --rules "$tmp/paths_rules.yaml" \
    --upstream "http://127.0.0.1:$UP" --threads 1
  mports+=("$PORT")
  pids_paths+=("$PID")
done
python3 - "$SOURCE_DIR/docs/proxy.md" "${mports[@]}" <<'PY' && pass "proxy: docs/proxy.md's table of route matches holds in every mode" || bad "paths table" "see above"
import re, socket, sys
doc = open(sys.argv[1]).read()
table = doc.split("<!-- proxy-paths-test:", 1)[1].split("\n\n", 1)[0]
rows = [[c.strip() for c in l.strip("|").split("|")] for l in table.splitlines()[1:] if l.startswith("| `")]
ports = [int(p) for p in sys.argv[2:]]
def status(port, target):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET " + target.encode("latin-1") + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    return data.split(b" ", 2)[1].decode()
word = {"429": "yes", "200": "no", "400": "400"}
wrong = []
for target, *want in rows:
    got = [word.get(status(p, target.strip("`")), "?") for p in ports]
    if got != want:
        wrong.append((target, want, got))
print("  %d targets, 3 modes; wrong: %s" % (len(rows), wrong or "none"))
sys.exit(0 if rows and not wrong else 1)
PY

# (A route whose limit refuses everything: none of them is forwarded.)
pipelined "${mports[0]}" "${pids_paths[0]}" /api/limited 200000 429 &&
  pass "proxy: 200000 pipelined requests answered 429 unread: memory bounded, all answered" || bad "pipelined 429" "see above"

# Every daemon stops cleanly (a sanitizer's report would fail the exit).
for p in "$SVPID" "$PXPID" "$PMPID" "$PID" "${pids_paths[@]}"; do
  kill -TERM "$p"
  wait "$p"; rc=$?
  [ "$rc" = 0 ] || bad "exit of $p" "status $rc"
done
exit $fail
