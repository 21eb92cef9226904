#!/bin/bash
# Integration test of sluice behind a real nginx: examples/nginx/nginx.conf
# (only its ports changed) in front of a small upstream started here, with
# `sluice serve --rules examples/nginx/rules.yaml` answering nginx's
# auth_request subrequests on GET /v1/auth.  Every wait has a timeout;
# the servers are killed in a trap.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
command -v nginx >/dev/null || { echo "FAIL nginx is not installed (scripts/deps.sh --test)"; exit 1; }
tmp=$(mktemp -d)
pids=()
NGINX_PID=""
cleanup() {
  # nginx's master stops its workers on TERM; a KILL would orphan them.
  if [ -n "$NGINX_PID" ]; then
    kill -TERM "$NGINX_PID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$NGINX_PID" 2>/dev/null || break; sleep 0.1; done
  fi
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$SOURCE_DIR/tests/sh/common.sh"

# docs/nginx.md quotes the example: every line of its nginx blocks must
# be a line of examples/nginx/nginx.conf.
python3 - "$SOURCE_DIR" <<'PY' || exit 1
import re, sys
root = sys.argv[1]
conf = [l.strip() for l in open(root + "/examples/nginx/nginx.conf")]
blocks = re.findall(r"```nginx\n(.*?)```", open(root + "/docs/nginx.md").read(), re.S)
if not blocks:
    sys.exit("FAIL docs/nginx.md: no nginx blocks")
for line in "".join(blocks).splitlines():
    if line.strip() and line.strip() not in conf:
        sys.exit("FAIL docs/nginx.md line not in examples/nginx/nginx.conf: " + line.strip())
print("PASS docs/nginx.md quotes examples/nginx/nginx.conf")
PY

# The upstream: answers every request 200 with the path and a checksum of
# the body, and logs "METHOD PATH API-KEY" per request it saw.
UP=$(free_port)
cat >"$tmp/upstream.py" <<'PY'
import hashlib, http.server, sys
log = open(sys.argv[2], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def handle_one(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        log.write("%s %s %s\n" % (self.command, self.path, self.headers.get("X-Api-Key", "-")))
        out = ("upstream %s sha256=%s\n" % (self.path, hashlib.sha256(body).hexdigest())).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = do_PUT = handle_one
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
python3 "$tmp/upstream.py" "$UP" "$tmp/upstream.log" &
pids+=($!)
wait_port "$UP"

"$SLUICE" serve --rules "$SOURCE_DIR/examples/nginx/rules.yaml" --listen 127.0.0.1:0 \
  --threads 2 --metrics-listen 127.0.0.1:0 2>"$tmp/sluice.log" &
SPID=$!
pids+=("$SPID")
SP=""
for _ in $(seq 200); do
  SP=$(sed -n 's/.*: listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/sluice.log")
  SM=$(sed -n 's/.*metrics listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/sluice.log")
  [ -n "$SP" ] && [ -n "$SM" ] && break
  sleep 0.05
done
[ -n "$SP" ] || { echo "FAIL sluice did not start"; cat "$tmp/sluice.log"; exit 1; }

NP=$(free_port)
mkdir -p "$tmp/ngx/tmp"
# As root, nginx's workers run as nobody: they must be able to reach the
# prefix and write request bodies under tmp/.
chmod 755 "$tmp" "$tmp/ngx"
chmod 1777 "$tmp/ngx/tmp"
sed -e "s/127\.0\.0\.1:8000/127.0.0.1:$NP/" -e "s/127\.0\.0\.1:8080/127.0.0.1:$SP/" \
  -e "s/127\.0\.0\.1:9000/127.0.0.1:$UP/" "$SOURCE_DIR/examples/nginx/nginx.conf" >"$tmp/ngx/nginx.conf"
[ "$(grep -c "127.0.0.1:\($NP\|$SP\|$UP\)" "$tmp/ngx/nginx.conf")" = 3 ] ||
  { echo "FAIL the example's ports were not all replaced"; exit 1; }
nginx -p "$tmp/ngx" -c "$tmp/ngx/nginx.conf" -e "$tmp/ngx/error.log" -g 'daemon off;' \
  >"$tmp/ngx/stdout.log" 2>&1 &
NGINX_PID=$!
wait_port "$NP"

# get PATH [curl args...]: sets STATUS, BODY and HDRS (a file).
get() {
  local path=$1
  shift
  STATUS=$(curl -s -m 5 -o "$tmp/body" -D "$tmp/hdrs" -w '%{http_code}' "$@" "http://127.0.0.1:$NP$path")
  BODY=$(cat "$tmp/body" 2>/dev/null)
  HDRS="$tmp/hdrs"
}
header() { sed -n "s/^$1: \(.*\)\r$/\1/Ip" "$HDRS" | head -1; }
seen() { grep -c " $1\$" "$tmp/upstream.log" 2>/dev/null || true; }

# Allowed requests reach the upstream and carry the closest limit's
# headers: the API key's 5 a minute, not the address's 120.
ok=0
for i in 1 2 3 4 5; do
  get /hello -H 'X-Api-Key: k1'
  if [ "$STATUS" != 200 ] || [[ "$BODY" != "upstream /hello "* ]]; then
    bad "allowed $i" "status $STATUS body $BODY"
  elif [ "$(header X-RateLimit-Limit)" != 5 ] || [ "$(header X-RateLimit-Remaining)" != $((5 - i)) ]; then
    bad "allowed $i: headers" "$(cat "$HDRS")"
  else
    ok=$((ok + 1))
  fi
done
[ "$ok" = 5 ] && pass "5 allowed requests reach the upstream, remaining 4..0"
[ "$(header RateLimit-Policy)" = '"per_api_key";q=5;w=60' ] && pass "RateLimit-Policy passed on" ||
  bad "RateLimit-Policy" "$(cat "$HDRS")"
[[ "$(header RateLimit)" == '"per_api_key";r=0;t='* ]] && pass "RateLimit passed on" || bad "RateLimit" "$(cat "$HDRS")"
[ -n "$(header X-RateLimit-Reset)" ] && pass "X-RateLimit-Reset passed on" || bad "X-RateLimit-Reset" "$(cat "$HDRS")"

# The sixth is limited: 429, JSON, Retry-After; the upstream never sees it.
get /hello -H 'X-Api-Key: k1'
[ "$STATUS" = 429 ] && pass "limited: 429" || bad "limited: status" "$STATUS $BODY"
python3 - "$BODY" <<'PY' && pass "limited: JSON error body" || bad "limited: body" "$BODY"
import json, sys
e = json.loads(sys.argv[1])["error"]
sys.exit(0 if e["code"] == "rate_limited" and e["retry_after_ms"] == 12000 else 1)
PY
[ "$(header Retry-After)" = 12 ] && [ "$(header X-RateLimit-Remaining)" = 0 ] &&
  [ "$(header X-RateLimit-Limit)" = 5 ] && [[ "$(header Content-Type)" == application/json* ]] &&
  pass "limited: Retry-After 12 (one GCRA interval) and the headers" || bad "limited: headers" "$(cat "$HDRS")"
[ "$(seen k1)" = 5 ] && pass "the upstream saw exactly the 5 allowed" || bad "upstream count" "$(seen k1)"

# Another key has its own counter; a request without a key only the
# address's.
get /hello -H 'X-Api-Key: k2'
[ "$STATUS" = 200 ] && [ "$(header X-RateLimit-Remaining)" = 4 ] && pass "another key: its own counter" ||
  bad "another key" "$STATUS $(cat "$HDRS")"
get /hello
[ "$STATUS" = 200 ] && [ "$(header X-RateLimit-Limit)" = 120 ] && pass "no key: the address's limit" ||
  bad "no key" "$STATUS $(cat "$HDRS")"

# Bodies pass through untouched (auth_request never sends them to sluice).
head -c 300000 /dev/urandom >"$tmp/payload"
want=$(sha256sum "$tmp/payload" | cut -d' ' -f1)
get /upload -X POST --data-binary @"$tmp/payload" -H 'X-Api-Key: k2'
[ "$STATUS" = 200 ] && [ "$BODY" = "upstream /upload sha256=$want" ] && pass "a 300 kB body reaches the upstream intact" ||
  bad "body" "$STATUS $BODY"

# The (method, path) descriptor: POSTs to a path under /upload, 3 a
# minute per path; a GET of the same path is another descriptor, matching
# no rule.
for i in 1 2 3; do get /upload/more -X POST --data-binary "part $i"; done
[ "$STATUS" = 200 ] && [ "$(header X-RateLimit-Limit)" = 3 ] && [ "$(header X-RateLimit-Remaining)" = 0 ] &&
  pass "route descriptor: the uploads limit speaks" || bad "route descriptor" "$STATUS $(cat "$HDRS")"
get /upload/more -X POST --data-binary 'part 3'
[ "$STATUS" = 429 ] && [[ "$(header RateLimit-Policy)" == '"uploads";'* ]] && pass "route descriptor: the fourth upload gets 429" ||
  bad "route descriptor: fourth" "$STATUS $(cat "$HDRS")"
get /upload/more
[ "$STATUS" = 200 ] && pass "route descriptor: a GET is not an upload" || bad "route descriptor: GET" "$STATUS"

# Concurrent clients: 40 requests of one key over 8 connections at once;
# exactly 5 pass.
seq 40 | xargs -P 8 -I{} curl -s -m 5 -o /dev/null -w '%{http_code}\n' -H 'X-Api-Key: k3' \
  "http://127.0.0.1:$NP/c{}" >"$tmp/codes"
ok=$(grep -c '^200$' "$tmp/codes"); limited=$(grep -c '^429$' "$tmp/codes")
[ "$ok" = 5 ] && [ "$limited" = 35 ] && [ "$(seen k3)" = 5 ] &&
  pass "concurrent: exactly 5 of 40 pass, 35 get 429" || bad "concurrent" "200: $ok, 429: $limited, upstream: $(seen k3)"

# A key sluice refuses (longer than its 4096-byte counter keys) is refused
# by nginx too, not let through.
long=$(head -c 5000 /dev/zero | tr '\0' 'x')
get /hello -H "X-Api-Key: $long"
[ "$STATUS" = 400 ] && [[ "$BODY" == *'"code":"bad_request"'* ]] && [ "$(seen "$long")" = 0 ] &&
  pass "a key sluice refuses: 400, not passed on" || bad "refused key" "$STATUS $BODY"

# sluice's own view: the decisions were counted.
m=$(curl -s -m 5 "http://127.0.0.1:$SM/metrics")
over=$(sed -n 's/^sluice_checks_total{result="over_limit"} //p' <<<"$m")
[ "${over:-0}" -ge 36 ] && pass "sluice counted the limited requests ($over)" || bad "metrics" "$over"

# sluice down: the example fails open, within its timeouts.
kill "$SPID"
wait "$SPID" 2>/dev/null
start=$(date +%s%N)
get /hello -H 'X-Api-Key: k1'
ms=$((($(date +%s%N) - start) / 1000000))
[ "$STATUS" = 200 ] && [ -z "$(header X-RateLimit-Limit)" ] && [ "$ms" -lt 3000 ] &&
  pass "sluice down: fails open in ${ms} ms" || bad "sluice down" "$STATUS in $ms ms: $(cat "$HDRS")"

if grep -E '\[(crit|alert|emerg)\]' "$tmp/ngx/error.log"; then bad "nginx error log" "see above"; fi
exit $fail
