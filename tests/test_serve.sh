#!/bin/bash
# Integration test of `sluice serve`: the real daemon on a loopback
# ephemeral port, driven by curl and python3 sockets.  Every wait has a
# timeout so a hang fails the test; the daemons are killed in a trap.
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

# start NAME RULES [FLAGS...]: sets PID, PORT and MPORT (the metrics
# listener's); the log is $tmp/NAME.log.
start() {
  local name=$1 rules=$2
  shift 2
  start_args "$name" --rules "$rules" --listen 127.0.0.1:0 --threads 2 \
    --metrics-listen 127.0.0.1:0 "$@"
}

# start_args NAME [FLAGS...]: as start, with only the given flags.
start_args() {
  local name=$1
  shift
  "$SLUICE" serve "$@" 2>"$tmp/$name.log" &
  PID=$!
  pids+=("$PID")
  PORT=""
  for _ in $(seq 200); do
    PORT=$(sed -n 's/.*: listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
    MPORT=$(sed -n 's/.*metrics listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.log")
    [ -n "$PORT" ] && { [[ "$*" != *--metrics-listen* ]] || [ -n "$MPORT" ]; } && return 0
    sleep 0.05
  done
  echo "FAIL start $name: no 'listening on' line"; cat "$tmp/$name.log"; exit 1
}

# call METHOD PATH [BODY]: sets STATUS, BODY and HDRS (a file).
call() {
  local data=()
  [ $# -ge 3 ] && data=(--data-binary "$3" -H 'Content-Type: application/json')
  STATUS=$(curl -s -m 5 -X "$1" -o "$tmp/body" -D "$tmp/hdrs" \
    -w '%{http_code}' "${data[@]}" "http://127.0.0.1:$PORT$2")
  BODY=$(cat "$tmp/body" 2>/dev/null)
  HDRS="$tmp/hdrs"
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

header() { grep -i "^$1:" "$HDRS" | head -1 | cut -d' ' -f2- | tr -d '\r'; }

desc() { # desc KEY VALUE [HITS]
  local hits=""
  [ $# -ge 3 ] && hits=", \"hits\": $3"
  echo "{\"domain\": \"test\", \"descriptors\": [{\"entries\": [{\"key\": \"$1\", \"value\": \"$2\"}]}]$hits}"
}

metric() { # metric 'name{labels}' -> value
  curl -s -m 5 "http://127.0.0.1:$MPORT/metrics" | grep -v '^#' | grep -F "$1 " | head -1 | awk '{print $2}'
}

rules="$tmp/rules.yaml"
cp "$SOURCE_DIR/tests/serve/rules.yaml" "$rules"
start main "$rules" --read-timeout 1s --idle-timeout 2s --max-adhoc-limits 4

call GET /healthz; expect healthz 200 '"ok"'
call GET /readyz; expect readyz 200 '"ready"'

# A limit of 5 per minute: exactly 5 OK, then 429 with headers and body.
for i in 1 2 3 4 5; do
  call POST /v1/check "$(desc user alice)"
  [ "$STATUS" = 200 ] || bad "limit request $i" "status $STATUS: $BODY"
done
[ "$(header X-RateLimit-Remaining)" = 0 ] || bad "remaining after 5" "$(cat "$HDRS")"
call POST /v1/check "$(desc user alice)"
expect "6th request over limit" 429 '"overall":"OVER_LIMIT"'
for h in X-RateLimit-Limit X-RateLimit-Remaining X-RateLimit-Reset Retry-After; do
  [ -n "$(header $h)" ] || bad "header $h" "missing: $(cat "$HDRS")"
done
[ "$(header X-RateLimit-Limit)" = 5 ] || bad "X-RateLimit-Limit" "$(header X-RateLimit-Limit)"
[ "$(header RateLimit-Policy)" = '"per_user";q=5;w=60' ] ||
  bad "RateLimit-Policy" "$(header RateLimit-Policy)"
[[ "$(header RateLimit)" == '"per_user";r=0;t='* ]] || bad "RateLimit" "$(header RateLimit)"
ra=$(header Retry-After)
{ [ "$ra" -ge 1 ] && [ "$ra" -le 60 ]; } || bad "Retry-After range" "$ra"
[[ "$BODY" == *'"name":"per_user"'*'"requests":5'*'"algorithm":"sliding_log"'* ]] ||
  bad "over-limit body" "$BODY"
pass "limit headers"

# hits 0 checks without consuming.
call POST /v1/check "$(desc user bob 2)"; expect "hits 2" 200 '"remaining":3'
call POST /v1/check "$(desc user bob 0)"; expect "hits 0 query" 200 '"remaining":3'
call POST /v1/check "$(desc user bob 0)"; expect "hits 0 again" 200 '"remaining":3'

# Deny, unlimited, shadow mode, no match.
call POST /v1/check "$(desc blocked x)"; expect deny 429 OVER_LIMIT
call POST /v1/check "$(desc free x)"; expect unlimited 200 '"algorithm":"unlimited"'
call POST /v1/check "$(desc trial t1)"; expect "shadow 1" 200 '"shadow_mode":true'
call POST /v1/check "$(desc trial t1)"; expect "shadow 2 still OK" 200 '"overall":"OK"'
call POST /v1/check "$(desc nomatch x)"; expect "no match" 200 '"limit":null'
call POST /v1/check '{"domain": "nope", "descriptors": [{"entries": [{"key": "a", "value": "b"}]}]}'
expect "unknown domain" 200 '"overall":"OK"'

# All-or-nothing: a request over one limit consumes from none.
call POST /v1/check '{"domain": "test", "descriptors": [{"entries": [{"key": "keep", "value": "k"}]}, {"entries": [{"key": "blocked", "value": "x"}]}]}'
expect "atomic: denied" 429
call POST /v1/check "$(desc keep k 0)"; expect "atomic: nothing consumed" 200 '"remaining":10'

# The lyft/ratelimit JSON endpoint.
call POST /json '{"domain": "test", "descriptors": [{"entries": [{"key": "user", "value": "carol"}]}], "hitsAddend": 2}'
expect "lyft /json" 200 '"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"name":"per_user","requestsPerUnit":5,"unit":"MINUTE"},"limitRemaining":3,"durationUntilReset":"'
call POST /json '{"domain": "test", "descriptors": [{"entries": [{"key": "user", "value": "alice"}]}]}'
expect "lyft /json over" 429 '"overallCode":"OVER_LIMIT"'
# A descriptor repeated in one request is counted for each (envoy lets a
# request through when the service errs, so an error would be a bypass).
dup='{"domain": "test", "descriptors": [{"entries": [{"key": "user", "value": "erin"}]}, {"entries": [{"key": "user", "value": "erin"}]}]}'
call POST /json "$dup"
expect "a repeated descriptor: both counted" 200 '"statuses":[{"code":"OK","currentLimit":{"name":"per_user","requestsPerUnit":5,"unit":"MINUTE"},"limitRemaining":3,"durationUntilReset":"'
call POST /json "$dup"; expect "a repeated descriptor: 4 of 5" 200 '"limitRemaining":1,'
call POST /json "$dup"; expect "a repeated descriptor: 2 more do not fit" 429 '"overallCode":"OVER_LIMIT"'
call POST /json '{"domain": "test", "descriptors": [{"entries": [{"key": "user", "value": "erin"}]}]}'
expect "a repeated descriptor: the last one left" 200 '"overallCode":"OK"'
call POST /json '{"domain": "test", "descriptors": [{"entries": [{"key": "user", "value": "erin"}]}]}'
expect "a repeated descriptor: then none" 429 '"overallCode":"OVER_LIMIT"'

# /json takes envoy's RateLimitRequest as protojson reads it: each field
# by its proto name or its JSON name, integers as numbers or strings.
lyft() { # lyft KEY VALUE [DESCRIPTOR-FIELDS [REQUEST-FIELDS]]
  call POST /json "{\"domain\": \"test\", \"descriptors\": [{\"entries\": [{\"key\": \"$1\", \"value\": \"$2\"}]${3:+, $3}}]${4:+, $4}}"
}
# The cases below count on one fixed window of a minute (lyft_rule):
# start them with 20 s of it left at least, so that no window ends among
# them (they take a few seconds, more under sanitizers).
sec=$((10#$(date +%S)))
[ "$sec" -ge 40 ] && sleep $((61 - sec))
lyft lyft a '' '"hits_addend": 2'
expect "lyft: request hits_addend (proto name)" 200 '"currentLimit":{"name":"lyft_rule","requestsPerUnit":3,"unit":"MINUTE"},"limitRemaining":1,'
lyft lyft b '' '"hitsAddend": "2"'
expect "lyft: request hitsAddend as a string" 200 '"limitRemaining":1,'
lyft lyft c '' '"hitsAddend": 0'
expect "lyft: request hitsAddend 0 counts 1" 200 '"limitRemaining":2,'
lyft lyft c '"hits_addend": 0' '"hitsAddend": 2'
expect "lyft: a descriptor's hits_addend 0 checks without counting" 200 '"limitRemaining":2,'
lyft lyft c '"hitsAddend": "1e0"'
expect "lyft: a descriptor's hitsAddend wins, 1e0 is 1" 200 '"limitRemaining":1,'
lyft lyft c '"hits_addend": 1' '"hits_addend": 3'
[ "$STATUS" = 200 ] && [[ "$BODY" == *'"currentLimit":{"name":"lyft_rule","requestsPerUnit":3,"unit":"MINUTE"},"durationUntilReset":"'* ]] &&
  pass "lyft: a limitRemaining of 0 is left out, as protojson writes it" || bad "lyft: remaining 0" "$STATUS $BODY"
lyft lyft c; expect "lyft: over the limit" 429 '"code":"OVER_LIMIT","currentLimit":{"name":"lyft_rule"'
lyft free x; expect "lyft: unlimited, as lyft answers it" 200 '"statuses":[{"code":"OK","limitRemaining":4294967295}]}'
lyft nomatch x; expect "lyft: no rule, no currentLimit" 200 '"statuses":[{"code":"OK"}]}'
lyft blocked x; expect "lyft: requests_per_unit 0, left out" 429 '"currentLimit":{"unit":"SECOND"},'
# The limit override: the request's own limit for the descriptor.  With
# the rule's own parameters it counts in the rule's counter.
lyft lyft d '"limit": {"requests_per_unit": 3, "unit": "MINUTE"}'
expect "override: the rule's limit" 200 '"currentLimit":{"requestsPerUnit":3,"unit":"MINUTE"},"limitRemaining":2,'
lyft lyft d; expect "override: shares the rule's counter" 200 '"name":"lyft_rule","requestsPerUnit":3,"unit":"MINUTE"},"limitRemaining":1,'
lyft lyft d '"limit": {"requestsPerUnit": "10", "unit": 3}'
expect "override: another limit, its own counter; unit by number" 200 '"currentLimit":{"requestsPerUnit":10,"unit":"HOUR"},"limitRemaining":9,'
[ "$(header RateLimit-Policy)" = '"_override_";q=10;w=3600' ] && pass "override: headers" || bad "override: headers" "$(header RateLimit-Policy)"
lyft lyft d '"limit": {"requestsPerUnit": 10, "unit": "HOUR"}, "hitsAddend": 9'
expect "override: its counter kept" 200 '"currentLimit":{"requestsPerUnit":10,"unit":"HOUR"},"durationUntilReset":'
lyft lyft d '"limit": {"requestsPerUnit": 10, "unit": "HOUR"}'; expect "override: over its limit" 429 OVER_LIMIT
lyft nomatch o '"limit": {"requests_per_unit": 1, "unit": "DAY"}'
expect "override: applies where no rule matches" 200 '"currentLimit":{"requestsPerUnit":1,"unit":"DAY"}'
lyft nomatch o '"limit": {"requests_per_unit": 1, "unit": "DAY"}'; expect "override: ... and limits" 429 OVER_LIMIT
lyft free o '"limit": {"requests_per_unit": 1, "unit": "SECOND"}'
expect "override: over an unlimited rule" 200 '"currentLimit":{"requestsPerUnit":1,"unit":"SECOND"}'
lyft free p '"limit": {"unit": "WEEK"}'; expect "override: requests_per_unit 0 refuses" 429 '"currentLimit":{"unit":"WEEK"}'
call POST /json '{"domain": "nope", "descriptors": [{"entries": [{"key": "a", "value": "b"}], "limit": {"requests_per_unit": 0, "unit": "SECOND"}}]}'
expect "override: nothing in an unknown domain" 200 '"statuses":[{"code":"OK"}]}'
# Unknown fields are ignored; null is a field's default; a known field of
# the wrong type is a 400 naming it.
lyft lyft e '"limit": null, "hits_addend": null, "colour": "red"' '"extra": {"x": [1]}'
expect "lyft: unknown fields ignored, null is absent" 200 '"limitRemaining":2,'
lyft lyft e '' '"hits_addend": "x"'; expect "lyft: bad request hits_addend" 400 '{"error":{"code":"ETYPE","message":"hits_addend: expected an integer from 0 to 4294967295"}}'
lyft lyft e '' '"hitsAddend": 1.5'; expect "lyft: fractional hitsAddend" 400 '"message":"hitsAddend: expected'
lyft lyft e '' '"hitsAddend": 4294967296'; expect "lyft: hitsAddend past uint32" 400 '"message":"hitsAddend: expected'
lyft lyft e '' '"hitsAddend": -1'; expect "lyft: negative hitsAddend" 400 '"code":"ETYPE"'
lyft lyft e '' '"hitsAddend": 1, "hits_addend": 1'; expect "lyft: one field by both names" 400 '"code":"EINVAL","message":"hits_addend and hitsAddend are one field'
lyft lyft e '"hitsAddend": true'; expect "lyft: bad descriptor hitsAddend" 400 '"message":"descriptors[0].hitsAddend: expected an integer from 0 to 1099511627776"'
lyft lyft e '"hits_addend": "01"'; expect "lyft: a number with a leading zero" 400 '"message":"descriptors[0].hits_addend: expected'
lyft lyft e '"limit": 5'; expect "lyft: limit not an object" 400 '"code":"ETYPE","message":"descriptors[0].limit: expected an object"'
lyft lyft e '"limit": {"requests_per_unit": "ten", "unit": "SECOND"}'
expect "lyft: bad requests_per_unit" 400 '"message":"descriptors[0].limit.requests_per_unit: expected an integer from 0 to 4294967295"'
lyft lyft e '"limit": {"requestsPerUnit": 1, "unit": "FORTNIGHT"}'
expect "lyft: bad unit" 400 '"code":"ETYPE","message":"descriptors[0].limit.unit: expected SECOND, MINUTE'
lyft lyft e '"limit": {"requestsPerUnit": 1, "unit": "second"}'; expect "lyft: an enum name is exact" 400 '"message":"descriptors[0].limit.unit:'
lyft lyft e '"limit": {"requestsPerUnit": 1}'; expect "lyft: no unit" 400 '"code":"EMISSING","message":"descriptors[0].limit.unit:'
lyft lyft e '"limit": {"requestsPerUnit": 1, "unit": 0}'; expect "lyft: UNKNOWN unit" 400 '"message":"descriptors[0].limit.unit:'
lyft lyft e '"limit": {"requestsPerUnit": 1, "requests_per_unit": 1, "unit": 1}'; expect "lyft: requests_per_unit twice" 400 '"code":"EINVAL","message":"descriptors[0].limit.requests_per_unit and requestsPerUnit are one field'
lyft lyft e; expect "lyft: refused requests consumed nothing" 200 '"limitRemaining":1,'

# The client-side API: POST /v1/increment reports sent requests, GET
# /v1/delay says how long to wait.  Ad hoc limits (id, interval, requests).
adhoc='"id": "gh", "interval": "1h", "requests": 2'
call GET '/v1/delay?id=gh&interval=1h&requests=2'
expect "delay: fresh ad hoc limit" 200 '"delay_ms":0,'
[[ "$BODY" == *'"remaining":2,"limit":2,"period_ms":3600000'* ]] && pass "delay: shape" || bad "delay: shape" "$BODY"
call POST /v1/increment "{$adhoc}"; expect "increment 1" 200 '"counted":true,"over_limit":false,"delay_ms":0,'
call POST /v1/increment "{$adhoc}"; expect "increment 2" 200 '"counted":true,"over_limit":false'
[[ "$BODY" == *'"remaining":0,'* ]] || bad "increment 2: remaining" "$BODY"
call POST /v1/increment "{$adhoc}"; expect "increment over the limit: counted, reported over" 200 '"counted":true,"over_limit":true'
call GET '/v1/delay?id=gh&interval=1h&requests=2'; expect "delay: exhausted" 200 '"remaining":0'
python3 - "$BODY" <<'PY' && pass "delay: positive, within the interval, next_free_ms = now + delay" || bad "delay: value" "$BODY"
import json, sys, time
b = json.loads(sys.argv[1]); now = time.time() * 1000
sys.exit(0 if 0 < b["delay_ms"] <= 3600000 and abs(b["next_free_ms"] - (now + b["delay_ms"])) < 5000 else 1)
PY
call GET '/v1/delay?id=gh&interval=1h&requests=2&algorithm=token_bucket'
expect "delay: algorithm= is a limit of its own" 200 '"delay_ms":0,"next_free_ms":'
call POST /v1/increment "{$adhoc, \"hits\": 0}"; expect "increment: hits 0 records nothing" 200 '"counted":true'
# A rule's descriptor: the same counter as /v1/check.
call GET '/v1/delay?domain=test&key=user&value=zed'; expect "delay: by descriptor" 200 '"remaining":5,"limit":5,"period_ms":60000'
call POST /v1/increment '{"domain": "test", "entries": [{"key": "user", "value": "zed"}], "hits": 5}'
expect "increment: by descriptor, hits" 200 '"counted":true,"over_limit":false'
call POST /v1/check "$(desc user zed)"; expect "increment and /v1/check share the counter" 429
call GET '/v1/delay?domain=test&key=user&value=zed'; expect "delay: descriptor exhausted" 200 '"remaining":0'
[[ "$BODY" != *'"delay_ms":0,'* ]] || bad "delay: descriptor delay positive" "$BODY"
call GET '/v1/delay?domain=test&key=user&value=a%20b+c'; expect "delay: percent-encoded value" 200 '"remaining":5'
call GET '/v1/delay?id=per_user'; expect "delay: by rule name" 200 '"remaining":5,"limit":5'
call GET '/v1/delay?id=per_user&domain=test'; expect "delay: by rule name in a domain" 200 '"limit":5'
call GET '/v1/delay?domain=test&key=blocked&value=x'; expect "delay: deny rule never" 200 '"delay_ms":-1,"next_free_ms":null'
call GET '/v1/delay?domain=test&key=free&value=x'; expect "delay: unlimited" 200 '"delay_ms":0,'
[[ "$BODY" == *'"remaining":null,"limit":null'* ]] || bad "delay: unlimited nulls" "$BODY"
call POST /v1/increment '{"domain": "test", "entries": [{"key": "blocked", "value": "x"}]}'
expect "increment: deny rule" 200 '"counted":false,"over_limit":true,"delay_ms":-1'
call GET '/v1/delay?domain=test&key=nomatch'; expect "delay: no rule matches" 404 '"code":"ENOLIMIT"'
call GET '/v1/delay?id=nosuchrule'; expect "delay: no rule of that name" 404 '"code":"ENOLIMIT"'

# GET /v1/auth (nginx's auth_request): descriptors as Sluice-Descriptor
# headers, one entry each; 204 or 429 with the rate-limit headers.
auth() { # QUERY [curl args...]
  local q=$1
  shift
  STATUS=$(curl -s -m 5 -o "$tmp/body" -D "$tmp/hdrs" -w '%{http_code}' "$@" "http://127.0.0.1:$PORT/v1/auth$q")
  BODY=$(cat "$tmp/body" 2>/dev/null)
  HDRS="$tmp/hdrs"
}
hdr() { sed -n "s/^$1: \(.*\)\r$/\1/Ip" "$HDRS" | head -1; }
auth '?domain=test' -H 'Sluice-Descriptor: user=auth1'
[ "$STATUS" = 204 ] && [ -z "$BODY" ] && [ "$(hdr X-RateLimit-Limit)" = 5 ] && [ "$(hdr X-RateLimit-Remaining)" = 4 ] &&
  [ "$(hdr RateLimit-Policy)" = '"per_user";q=5;w=60' ] && ! grep -qi '^content-length' "$HDRS" &&
  pass "auth: 204, no body, the rate-limit headers" || bad "auth: 204" "$STATUS $BODY $(cat "$HDRS")"
auth '?domain=test' -X POST -H 'Sluice-Descriptor: user=auth1'
[ "$STATUS" = 204 ] && [ "$(hdr X-RateLimit-Remaining)" = 3 ] && pass "auth: any method" || bad "auth: POST" "$STATUS"
for _ in 1 2 3; do auth '?domain=test' -H 'Sluice-Descriptor: user=auth1'; done
auth '?domain=test' -H 'Sluice-Descriptor: user=auth1'
[ "$STATUS" = 429 ] && [ "$(hdr X-RateLimit-Remaining)" = 0 ] && [ -n "$(hdr Retry-After)" ] &&
  [[ "$BODY" == *'"code":"rate_limited","message":"rate limit exceeded: per_user","retry_after_ms":'* ]] &&
  pass "auth: 429 with a JSON error and Retry-After" || bad "auth: 429" "$STATUS $BODY $(cat "$HDRS")"
auth '?domain=test' -I -H 'Sluice-Descriptor: user=auth1'
[ "$STATUS" = 429 ] && [[ "$BODY" != *rate_limited* ]] && [ "$(hdr Content-Length)" = 0 ] &&
  pass "auth: HEAD, no body" || bad "auth: HEAD" "$STATUS $BODY"
auth '?domain=test&hits=0' -H 'Sluice-Descriptor: user=auth1'
[ "$STATUS" = 204 ] && [ "$(hdr X-RateLimit-Remaining)" = 0 ] && pass "auth: hits=0 asks without consuming" || bad "auth: hits=0" "$STATUS"
auth '?domain=test&hits=2' -H 'Sluice-Descriptor: user=auth2'
[ "$STATUS" = 204 ] && [ "$(hdr X-RateLimit-Remaining)" = 3 ] && pass "auth: hits" || bad "auth: hits" "$STATUS $(cat "$HDRS")"
# Entries under one header name make one descriptor (user, sub: no rule
# at that depth); under two names, two descriptors.
auth '?domain=test' -H 'Sluice-Descriptor-A: user=auth3' -H 'Sluice-Descriptor-A: sub=x'
[ "$STATUS" = 204 ] && [ -z "$(hdr X-RateLimit-Limit)" ] && pass "auth: one descriptor of two entries" || bad "auth: grouping" "$STATUS $(cat "$HDRS")"
auth '?domain=test' -H 'Sluice-Descriptor-A: user=auth3' -H 'sluice-descriptor-b: blocked=x'
[ "$STATUS" = 429 ] && pass "auth: two descriptors, one denied" || bad "auth: two descriptors" "$STATUS"
auth '?domain=test' -H 'Sluice-Descriptor: user=auth4 '
auth '?domain=test' -H 'Sluice-Descriptor: user=auth4'
[ "$(hdr X-RateLimit-Remaining)" = 3 ] && pass "auth: trailing whitespace is not part of the value" || bad "auth: OWS" "$(cat "$HDRS")"
auth '?domain=nosuchdomain' -H 'Sluice-Descriptor: user=x'
[ "$STATUS" = 204 ] && [ -z "$(hdr X-RateLimit-Limit)" ] && pass "auth: unknown domain allowed" || bad "auth: unknown domain" "$STATUS"
# Bad input: 400 naming the problem.
auth '?domain=test'; expect "auth: no descriptor" 400 '"code":"EMISSING","message":"no Sluice-Descriptor header'
auth '?domain=test' -H 'Sluice-Descriptor: user'; expect "auth: entry without =" 400 '"code":"EMISSING","message":"Sluice-Descriptor: expected key=value'
auth '?domain=test' -H 'Sluice-Descriptor: =v'; expect "auth: empty key" 400 '"code":"EMISSING"'
auth '?domain=test' -H 'Sluice-Descriptor: user=a' -H 'Sluice-Domain: test'; expect "auth: unknown Sluice header" 400 '"message":"Sluice-Domain: unknown header"'
auth '?domain=test' -H 'Sluice-Descriptorx: user=a'; expect "auth: a header name that only starts alike" 400 '"code":"EINVAL"'
auth '' -H 'Sluice-Descriptor: user=a'; expect "auth: no domain" 400 '"message":"domain: missing'
auth '?domain=test&hits=x' -H 'Sluice-Descriptor: user=a'; expect "auth: bad hits" 400 '"message":"hits: expected'
auth '?domain=test&color=red' -H 'Sluice-Descriptor: user=a'; expect "auth: unknown parameter" 400 '"message":"color: unknown parameter"'
auth '?domain=%zz' -H 'Sluice-Descriptor: user=a'; expect "auth: bad percent-encoding" 400 '"message":"domain: bad percent-encoding"'
many=(); for i in $(seq 65); do many+=(-H "Sluice-Descriptor-$i: user=m$i"); done
auth '?domain=test' "${many[@]}"; expect "auth: too many descriptors" 400 '"code":"ETOOMANY"'
many=(); for i in $(seq 17); do many+=(-H "Sluice-Descriptor: k$i=v"); done
auth '?domain=test' "${many[@]}"; expect "auth: too many entries" 400 '"code":"ETOOMANY"'
# A header name and value split over several reads, after a header with
# an empty value: kept whole, and the empty one is not glued to it.
python3 - "$PORT" <<'PY' && pass "auth: a header split over reads" || bad "auth: split header" "see above"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
parts = [b"GET /v1/auth?domain=test HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nSlui",
         b"ce-Descr", b"iptor: user=spl", b"it\r\n\r\n"]
for p in parts:
    s.sendall(p)
    time.sleep(0.05)
data = s.recv(65536)
ok = data.startswith(b"HTTP/1.1 204") and b"X-RateLimit-Remaining: 4\r\n" in data
print("" if ok else "split header: %r" % data)
sys.exit(0 if ok else 1)
PY
# Bad parameters: 400 naming the parameter.
call GET '/v1/delay'; expect "delay: nothing named" 400 '"code":"EMISSING","message":"id or domain'
call GET '/v1/delay?id=gh&interval=1h'; expect "delay: requests missing" 400 '"message":"requests: missing'
call GET '/v1/delay?id=gh&requests=2'; expect "delay: interval missing" 400 '"message":"interval: missing'
call GET '/v1/delay?id=gh&interval=1fortnight&requests=2'; expect "delay: bad interval" 400 '"code":"EINVAL","message":"interval: '
call GET '/v1/delay?id=gh&interval=0s&requests=2'; expect "delay: zero interval" 400 '"message":"interval: '
call GET '/v1/delay?id=gh&interval=1h&requests=0'; expect "delay: zero requests" 400 '"message":"requests: '
call GET '/v1/delay?id=gh&interval=1h&requests=-3'; expect "delay: negative requests" 400 '"message":"requests: '
call GET '/v1/delay?id=gh&interval=1h&requests=2&algorithm=fifo'; expect "delay: bad algorithm" 400 '"message":"algorithm: unknown'
call GET '/v1/delay?interval=1h&requests=2'; expect "delay: ad hoc without id" 400 '"message":"id: required'
call GET '/v1/delay?id=gh&id=gh'; expect "delay: parameter twice" 400 '"message":"id: given twice'
call GET '/v1/delay?id=gh&colour=red'; expect "delay: unknown parameter" 400 '"message":"colour: unknown parameter'
call GET '/v1/delay?domain=test&value=x'; expect "delay: value before key" 400 '"message":"value: must follow'
call GET '/v1/delay?domain=test'; expect "delay: domain without key" 400 '"message":"key: '
call GET '/v1/delay?domain=test&key=user&value=%zz'; expect "delay: bad percent-encoding" 400 '"message":"value: bad percent-encoding'
call GET '/v1/delay?id=gh&domain=test&key=user'; expect "delay: id and descriptor" 400 '"message":"id: name a limit'
call GET '/v1/delay?id=gh&interval=1h&requests=2&domain=test'; expect "delay: ad hoc with domain" 400 '"message":"domain: '
call GET '/v1/delay?id=gh&interval=1h&requests=2&hits=2'; expect "delay: hits" 400 '"message":"hits: '
call GET "/v1/delay?id=$(head -c 300 /dev/zero | tr '\0' i)&interval=1h&requests=2"; expect "delay: id too long" 400 '"code":"EKEYLEN"'
call POST /v1/delay '{}'; expect "delay: POST" 405 '"code":"EMETHOD"'
call GET /v1/increment; expect "increment: GET" 405 '"code":"EMETHOD"'
call POST /v1/increment '{"id": '; expect "increment: malformed JSON" 400 '"code":"EJSON"'
call POST /v1/increment '[1]'; expect "increment: not an object" 400 '"code":"ETYPE"'
call POST /v1/increment "{$adhoc, \"hits\": -1}"; expect "increment: negative hits" 400 '"message":"hits: '
call POST /v1/increment "{$adhoc, \"at_ms\": 1}"; expect "increment: at_ms refused" 400 '"message":"at_ms: not supported'
call POST /v1/increment '{"id": 5}'; expect "increment: id type" 400 '"code":"ETYPE","message":"id: '
call POST /v1/increment '{"domain": "test", "entries": "user"}'; expect "increment: entries type" 400 '"message":"entries: '
call POST /v1/increment '{"id": "gh", "interval": "1h", "requests": 2, "colour": "red"}'; expect "increment: unknown field" 400 '"message":"colour: unknown parameter'
# The cache of ad hoc limits (--max-adhoc-limits 4; gh twice so far):
# past it the least recently used goes, and its counter stays
# (tests/test_serve_resources.sh has the rest).
call GET '/v1/delay?id=c1&interval=1h&requests=2'; expect "adhoc cache: 3rd" 200
call GET '/v1/delay?id=c2&interval=1h&requests=2'; expect "adhoc cache: 4th" 200
call GET '/v1/delay?id=c3&interval=1h&requests=2'; expect "adhoc cache: 5th evicts, answers" 200 '"remaining":2'
call GET '/v1/delay?id=c1&interval=1h&requests=2'; expect "adhoc cache: cached ones still answer" 200

call GET /v1/rules; expect "/v1/rules" 200 '"domains":["test"]'
[[ "$BODY" == *'"last_reload_error":null'* ]] || bad "/v1/rules error null" "$BODY"

# Metrics move.
ok=$(metric 'sluice_checks_total{result="ok"}')
call POST /v1/check "$(desc user dave)"
ok2=$(metric 'sluice_checks_total{result="ok"}')
[ "$ok2" = $((ok + 1)) ] && pass "metrics: checks_total moves" || bad "metrics: checks_total" "$ok -> $ok2"
[ "$(metric 'sluice_rule_over_limit_total{domain="test",rule="per_user"}')" -ge 2 ] &&
  pass "metrics: over limit per rule" || bad "metrics: over limit" "$(metric 'sluice_rule_over_limit_total{domain="test",rule="per_user"}')"
[ "$(metric 'sluice_rule_shadow_mode_total{domain="test",rule="trial",descriptor="trial_t1"}')" = 1 ] &&
  pass "metrics: shadow pass with detailed_metric" || bad "metrics: shadow" "$(curl -s "http://127.0.0.1:$MPORT/metrics" | grep shadow)"
# near_limit (lyft): hits allowed past 80% of the limit (4 of per_user's 5).
nl() { metric 'sluice_rule_near_limit_total{domain="test",rule="per_user"}'; }
n0=$(nl)
for i in 1 2 3 4; do call POST /v1/check "$(desc user nearly)"; done
[ "$(nl)" = "$n0" ] && pass "metrics: near_limit still at 80%" || bad "metrics: near_limit at 80%" "$n0 -> $(nl)"
call POST /v1/check "$(desc user nearly)"
[ "$(nl)" = $((n0 + 1)) ] && pass "metrics: near_limit moves past 80%" || bad "metrics: near_limit past 80%" "$n0 -> $(nl)"
call POST /v1/check "$(desc user nearly)"
[ "$(nl)" = $((n0 + 1)) ] && pass "metrics: near_limit not counted over the limit" || bad "metrics: near_limit over" "$n0 -> $(nl)"
call POST /v1/check "$(desc user nearly2 5)"
[ "$(nl)" = $((n0 + 2)) ] && pass "metrics: near_limit counts hits past the threshold" || bad "metrics: near_limit hits" "$n0 -> $(nl)"
# Descriptors that matched nothing, by domain: a known domain apart,
# every unknown one under "_unknown_" (the client names it).
um() { metric "sluice_unmatched_descriptors_total{domain=\"$1\"}"; }
u_test=$(um test); u_unknown=$(um _unknown_)
[ -n "$u_test" ] && [ -n "$u_unknown" ] && pass "metrics: unmatched by domain" || bad "metrics: unmatched by domain" "'$u_test' '$u_unknown'"
call POST /v1/check '{"domain": "test", "descriptors": [{"entries": [{"key": "nomatch", "value": "m"}]}, {"entries": [{"key": "user", "value": "m"}]}]}'
call POST /json '{"domain": "test", "descriptors": [{"entries": [{"key": "user", "value": "m"}, {"key": "deeper", "value": "m"}]}]}'
[ "$(um test)" = $((u_test + 2)) ] && [ "$(um _unknown_)" = "$u_unknown" ] &&
  pass "metrics: unmatched descriptors of a known domain" || bad "metrics: unmatched known" "$u_test -> $(um test)"
call POST /v1/check '{"domain": "nosuch1", "descriptors": [{"entries": [{"key": "a", "value": "b"}]}, {"entries": [{"key": "c", "value": "d"}]}]}'
call POST /json '{"domain": "nosuch2", "descriptors": [{"entries": [{"key": "a", "value": "b"}]}]}'
[ "$(um _unknown_)" = $((u_unknown + 3)) ] && [ "$(um test)" = $((u_test + 2)) ] &&
  pass "metrics: unknown domains under _unknown_" || bad "metrics: unmatched unknown" "$u_unknown -> $(um _unknown_)"
curl -s -m 5 "http://127.0.0.1:$MPORT/metrics" | grep -q 'domain="nosuch' &&
  bad "metrics: no series per unknown domain" "$(curl -s "http://127.0.0.1:$MPORT/metrics" | grep nosuch)" ||
  pass "metrics: no series per unknown domain"
[ "$(metric sluice_decision_duration_seconds_count)" -ge 10 ] && pass "metrics: latency" || bad "metrics: latency" ""
[ -n "$(metric sluice_open_connections)" ] && pass "metrics: open connections" || bad "metrics: connections" ""

# Bad input: each gets its own 4xx and JSON error code.
call POST /v1/check '{"domain": '; expect "malformed JSON" 400 '"code":"EJSON"'
call POST /v1/check '[1]'; expect "not an object" 400 '"code":"ETYPE"'
call POST /v1/check "$(printf '{"domain": "\xff"}')"; expect "invalid UTF-8" 400 '"code":"EJSON"'
call POST /v1/check '{"domain": 5, "descriptors": []}'; expect "domain type" 400 '"code":"ETYPE"'
call POST /v1/check '{"descriptors": [{"entries": [{"key": "a", "value": "b"}]}]}'
expect "missing domain" 400 '"code":"EMISSING"'
call POST /v1/check '{"domain": "test", "descriptors": "x"}'; expect "descriptors type" 400 '"code":"ETYPE"'
call POST /v1/check '{"domain": "test", "descriptors": [{"entries": [{"key": 1, "value": "b"}]}]}'
expect "entry key type" 400 '"code":"ETYPE"'
call POST /v1/check '{"domain": "test", "hits": -1, "descriptors": [{"entries": [{"key": "a", "value": "b"}]}]}'
expect "negative hits" 400 '"code":"ETYPE"'
many=$(python3 -c 'import json; print(json.dumps({"domain": "test", "descriptors": [{"entries": [{"key": "user", "value": "x"}]}] * 65}))')
call POST /v1/check "$many"; expect "too many descriptors" 400 '"code":"ETOOMANY"'
deep=$(python3 -c 'import json; print(json.dumps({"domain": "test", "descriptors": [{"entries": [{"key": "k", "value": "v"}] * 17}]}))')
call POST /v1/check "$deep"; expect "too many entries" 400 '"code":"ETOOMANY"'
# Each descriptor consumes its own hits, still all or nothing.
twohits='{"domain": "test", "descriptors": [{"entries": [{"key": "keep", "value": "a"}], "hits": 1}, {"entries": [{"key": "raise", "value": "b"}], "hits": 2}]}'
call POST /v1/check "$twohits"; expect "differing hits" 200 '"remaining":9,'
[[ "$BODY" == *'"remaining":0,'* ]] || bad "differing hits: second descriptor" "$BODY"
call POST /v1/check "$twohits"; expect "differing hits: one over" 429
call POST /v1/check "$(desc keep a 0)"; expect "differing hits: nothing taken when one is over" 200 '"remaining":9,'
python3 -c 'print("{\"domain\": \"" + "x" * 70000 + "\"}")' >"$tmp/big.json"
STATUS=$(curl -s -m 5 -o "$tmp/body" -w '%{http_code}' --data-binary @"$tmp/big.json" "http://127.0.0.1:$PORT/v1/check")
BODY=$(cat "$tmp/body"); expect "oversized body" 413 '"code":"ETOOLARGE"'
STATUS=$(curl -s -m 5 -o "$tmp/body" -w '%{http_code}' -H "X-Big: $(head -c 9000 /dev/zero | tr '\0' a)" "http://127.0.0.1:$PORT/healthz")
BODY=$(cat "$tmp/body"); expect "oversized headers" 431 '"code":"EHEADERS"'
call GET /nope; expect "unknown route" 404 '"code":"ENOTFOUND"'
call GET /v1/check; expect "wrong method" 405 '"code":"EMETHOD"'
[ "$(header Allow)" = POST ] || bad "Allow header" "$(header Allow)"
call POST /healthz '{}'; expect "POST to a GET route" 405 '"code":"EMETHOD"'

# Raw sockets: pipelining, keep-alive, malformed HTTP, slow clients.
python3 - "$PORT" <<'PY' || fail=1
import socket, sys, time
port = int(sys.argv[1])
def conn():
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    return s
def read_responses(s, n):
    data = b""
    while data.count(b"HTTP/1.1 ") < n or not complete(data, n):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data
def complete(data, n):
    # n responses, each with its whole Content-Length body
    pos = 0
    for _ in range(n):
        end = data.find(b"\r\n\r\n", pos)
        if end < 0:
            return False
        head = data[pos:end].decode()
        cl = [int(l.split(":")[1]) for l in head.split("\r\n") if l.lower().startswith("content-length:")][0]
        pos = end + 4 + cl
        if len(data) < pos:
            return False
    return True
def check(name, cond, detail=""):
    print(("PASS " if cond else "FAIL ") + name + ("" if cond else ": " + repr(detail)))
    if not cond:
        global failed
        failed = True
failed = False
body = b'{"domain": "test", "descriptors": [{"entries": [{"key": "free", "value": "p"}]}]}'
post = b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
s = conn()
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + post + b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
r = read_responses(s, 3)
parts = r.split(b"HTTP/1.1 ")[1:]
check("pipelining: three responses in order", len(parts) == 3 and b'"ok"' in parts[0] and b'"overall"' in parts[1] and b'"ready"' in parts[2], r)
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
check("keep-alive: same connection again", b"200 OK" in read_responses(s, 1))
s.close()
s = conn()
s.sendall(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
r = s.recv(1000)
check("Expect: 100-continue answered", r == b"HTTP/1.1 100 Continue\r\n\r\n", r)
s.sendall(body)
r = read_responses(s, 1)
check("body after 100 Continue decided", r.startswith(b"HTTP/1.1 200"), r)
s.close()
for name, head, want in [
        ("HTTP/1.1 without Host: 400 naming it", b"GET /healthz HTTP/1.1\r\n\r\n", b"without a Host"),
        ("two Host fields: 400 naming it", b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", b"more than one Host"),
        ("a Host split over reads counts", None, b'"ok"'),
        ("HTTP/1.0 without Host: answered", b"GET /healthz HTTP/1.0\r\n\r\n", b'"ok"')]:
    s = conn()
    if head is None:
        for piece in (b"GET /healthz HTTP/1.1\r\nHo", b"st: x\r\nConnection: close\r\n\r\n"):
            s.sendall(piece)
            time.sleep(0.05)
    else:
        s.sendall(head)
    r = read_responses(s, 1)
    check(name, want in r and (r.startswith(b"HTTP/1.1 400") == (b"Host" in want)), r)
    s.close()
s = conn()
s.sendall(b"BLAH /x HTTP/1.1\r\n\r\n")
r = read_responses(s, 1)
check("malformed HTTP: 400 EHTTP", r.startswith(b"HTTP/1.1 400") and b'"EHTTP"' in r, r)
s.close()
s = conn()
s.sendall(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
t = time.time()
r = read_responses(s, 1)
check("slow client: 408 after the read timeout", r.startswith(b"HTTP/1.1 408") and time.time() - t < 4, r)
s.close()
s = conn()
t = time.time()
r = s.recv(100)
check("idle keep-alive connection closed", r == b"" and time.time() - t < 4, r)
s.close()
sys.exit(1 if failed else 0)
PY

# Several threads, one store: 8 clients x 25 keep-alive requests against
# a limit of 100 get exactly 100 OKs.
python3 - "$PORT" <<'PY' || fail=1
import http.client, sys, threading
port = int(sys.argv[1])
body = '{"domain": "test", "descriptors": [{"entries": [{"key": "shared", "value": "s"}]}]}'
codes = []
lock = threading.Lock()
def client():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    for _ in range(25):
        c.request("POST", "/v1/check", body)
        r = c.getresponse(); r.read()
        with lock:
            codes.append(r.status)
    c.close()
ts = [threading.Thread(target=client) for _ in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
ok = codes.count(200) == 100 and codes.count(429) == 100
print(("PASS" if ok else "FAIL") + " concurrent clients: exactly the limit passes (%d OK, %d 429)" % (codes.count(200), codes.count(429)))
sys.exit(0 if ok else 1)
PY

# Hot reload: raise a limit; counters of unchanged rules stay.
call POST /v1/check "$(desc keep k 3)"; expect "before reload: kept" 200 '"remaining":7'
call POST /v1/check "$(desc raise r 2)"; expect "before reload: raised" 200 '"remaining":0'
call POST /v1/check "$(desc raise r)"; expect "before reload: raised over" 429
v1=$(curl -s -m 5 "http://127.0.0.1:$PORT/v1/rules" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
hits_kept=$(metric 'sluice_rule_hits_total{domain="test",rule="kept"}')
sed -i 's/requests_per_unit: 2$/requests_per_unit: 4/; s/name: raised$/name: raised_v2/' "$rules"
for _ in $(seq 60); do
  v2=$(curl -s -m 5 "http://127.0.0.1:$PORT/v1/rules" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
  [ "$v2" != "$v1" ] && break
  sleep 0.1
done
[ "$v2" != "$v1" ] && pass "reload on file change" || bad "reload on file change" "version still $v1"
call POST /v1/check "$(desc raise r)"; expect "after reload: raised limit applies" 200 '"requests":4'
# The rules' text and metrics series are made or found once per rules
# set: after a reload they must be the new set's, not the old one's.
[[ "$BODY" == *'"name":"raised_v2"'* ]] &&
  pass "after reload: the answer names the renamed rule" ||
  bad "after reload: the answer names the renamed rule" "$BODY"
[ "$(header RateLimit-Policy)" = '"raised_v2";q=4;w=3600' ] &&
  pass "after reload: headers name the renamed rule" ||
  bad "after reload: headers name the renamed rule" "$(header RateLimit-Policy)"
[ "$(metric 'sluice_rule_hits_total{domain="test",rule="raised_v2"}')" = 1 ] &&
  pass "after reload: metrics count the renamed rule" ||
  bad "after reload: metrics count the renamed rule" "$(curl -s "http://127.0.0.1:$MPORT/metrics" | grep 'rule="raised')"
call POST /v1/check "$(desc keep k 0)"; expect "after reload: kept counter kept" 200 '"remaining":7'
[ "$(metric 'sluice_rule_hits_total{domain="test",rule="kept"}')" = $((hits_kept + 1)) ] &&
  pass "after reload: an unchanged rule's series goes on" ||
  bad "after reload: an unchanged rule's series goes on" "$hits_kept -> $(metric 'sluice_rule_hits_total{domain="test",rule="kept"}')"

# A bad rules file is refused; the old rules stay live.
cp "$rules" "$tmp/good.yaml"
printf 'domain: test\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n' >"$rules"
for _ in $(seq 60); do
  [ "$(metric 'sluice_rules_reloads_total{result="failed"}')" = 1 ] && break
  sleep 0.1
done
[ "$(metric 'sluice_rules_reloads_total{result="failed"}')" = 1 ] && pass "bad rules: reload-failed metric" || bad "bad rules metric" ""
grep -q "sluice: rules reload failed: $rules:[0-9]*:[0-9]*: " "$tmp/main.log" &&
  pass "bad rules: logged with file:line:col" || bad "bad rules log" "$(cat "$tmp/main.log")"
call GET /v1/rules
[[ "$BODY" == *"\"last_reload_error\":\"$rules:"* && "$BODY" == *"\"version\":\"$v2\""* ]] &&
  pass "bad rules: /v1/rules shows the error, old version" || bad "bad rules /v1/rules" "$BODY"
call POST /v1/check "$(desc keep k 0)"; expect "bad rules: old rules still decide" 200 '"remaining":7'

# SIGHUP reloads (the file is put back first, then HUP without change).
cp "$tmp/good.yaml" "$rules"
for _ in $(seq 60); do
  call GET /v1/rules; [[ "$BODY" == *'"last_reload_error":null'* ]] && break; sleep 0.1
done
okn=$(metric 'sluice_rules_reloads_total{result="ok"}')
kill -HUP "$PID"
for _ in $(seq 60); do
  [ "$(metric 'sluice_rules_reloads_total{result="ok"}')" = $((okn + 1)) ] && break; sleep 0.1
done
[ "$(metric 'sluice_rules_reloads_total{result="ok"}')" = $((okn + 1)) ] && pass "SIGHUP reload" || bad "SIGHUP reload" "$okn"

# SIGTERM drains: a request under way when the signal comes is answered.
python3 - "$PORT" "$PID" <<'PY' || fail=1
import os, signal, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
body = b'{"domain": "test", "descriptors": [{"entries": [{"key": "free", "value": "d"}]}]}'
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
time.sleep(0.2)
os.kill(pid, signal.SIGTERM)
time.sleep(0.3)
s.sendall(body)
data = b""
while True:
    c = s.recv(65536)
    if not c:
        break
    data += c
ok = data.startswith(b"HTTP/1.1 200") and b"Connection: close" in data
print(("PASS" if ok else "FAIL") + " SIGTERM drains the request under way" + ("" if ok else ": %r" % data))
sys.exit(0 if ok else 1)
PY
status=""
for _ in $(seq 100); do
  if ! kill -0 "$PID" 2>/dev/null; then wait "$PID"; status=$?; break; fi
  sleep 0.05
done
[ "$status" = 0 ] && pass "SIGTERM: exit 0" || bad "SIGTERM exit" "status '$status', log: $(tail -c 6000 "$tmp/main.log")"

# Pipelined requests for large answers: memory stays bounded while the
# client does not read (the parser is held past SV_MAX_PENDING_OUTPUT),
# and every answer comes once it does.
# (Under sanitizers only the answers are checked: their allocators keep
# freed memory in quarantine, so resident size says nothing.)
# (On the decision API's listener, where --public-metrics puts them too.)
start bigout "$rules" --public-metrics true
sanitized=0
grep -qaE '__(asan|tsan)_init' "$SLUICE" && sanitized=1
python3 - "$PORT" "$PID" "$sanitized" <<'PY' || fail=1
import re, socket, sys, time
port, pid, sanitized = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
def rss():
    return int(re.search(r"VmRSS:\s+(\d+)", open("/proc/%d/status" % pid).read()).group(1))
n = 12000  # about 50 MB of answers
before = rss()
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * n)
time.sleep(1.5)
grown = rss() - before
data = b""
while data.count(b"HTTP/1.1 200 ") < n:
    chunk = s.recv(1 << 20)
    if not chunk:
        break
    data += chunk
got = data.count(b"HTTP/1.1 200 ")
ok = (sanitized or grown < 6 * 1024) and got == n
print(("PASS" if ok else "FAIL") + " %d pipelined GET /metrics unread: sluice grew %d KiB, then "
      "answered %d" % (n, grown, got))
sys.exit(0 if ok else 1)
PY
kill -TERM "$PID"; wait "$PID"

# --max-connections: connections over the cap are accepted and closed.
start maxconn "$rules" --max-connections 2
python3 - "$PORT" <<'PY' || fail=1
import socket, sys
port = int(sys.argv[1])
a = socket.create_connection(("127.0.0.1", port), timeout=5)
b = socket.create_connection(("127.0.0.1", port), timeout=5)
a.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); ra = a.recv(1000)
b.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); rb = b.recv(1000)
c = socket.create_connection(("127.0.0.1", port), timeout=5)
try:
    c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); rc = c.recv(1000)
except ConnectionResetError:
    rc = b""
ok = ra.startswith(b"HTTP/1.1 200") and rb.startswith(b"HTTP/1.1 200") and rc == b""
print(("PASS" if ok else "FAIL") + " --max-connections: third connection closed" + ("" if ok else ": %r %r %r" % (ra, rb, rc)))
sys.exit(0 if ok else 1)
PY
kill -TERM "$PID"; wait "$PID"

# --config FILE: YAML settings with the flags' names; a relative rules
# path is the file's directory; flags override the file.
mkdir "$tmp/cfg"
cp "$SOURCE_DIR/tests/serve/rules.yaml" "$tmp/cfg/limits.yaml"
cat >"$tmp/cfg/serve.yaml" <<'EOF'
# sluice serve settings
listen: 127.0.0.1:0
threads: 1
rules: limits.yaml
max_body_bytes: 300
read_timeout: 2s
max_adhoc_limits: 1
EOF
start_args config --config "$tmp/cfg/serve.yaml" --threads 3
grep -q '(3 threads)' "$tmp/config.log" && pass "--config: a flag overrides the file" || bad "--config: override" "$(cat "$tmp/config.log")"
call GET /readyz; expect "--config: rules relative to the file" 200 '"ready"'
call POST /v1/check "$(desc user cfg)"; expect "--config: decides" 200 '"remaining":4'
call POST /v1/check "{\"domain\": \"$(head -c 400 /dev/zero | tr '\0' d)\"}"
expect "--config: max_body_bytes applies" 413 '"code":"ETOOLARGE"'
call GET '/v1/delay?id=one&interval=1m&requests=1'; expect "--config: max_adhoc_limits 1: first" 200
call GET '/v1/delay?id=two&interval=1m&requests=1'; expect "--config: max_adhoc_limits 1: second evicts the first" 200 '"remaining":1'
kill -TERM "$PID"; wait "$PID"
# Bad files: exit 2 with FILE:LINE:COLUMN: message.
badcfg() { # badcfg NAME TEXT EXPECTED-STDERR
  printf '%s' "$2" >"$tmp/cfg/bad.yaml"
  timeout 10 "$SLUICE" serve --config "$tmp/cfg/bad.yaml" --listen 127.0.0.1:0 2>"$tmp/cfg/err" </dev/null
  local st=$?
  if [ "$st" = 2 ] && grep -qF "$3" "$tmp/cfg/err"; then pass "--config: $1"; else
    bad "--config: $1" "exit $st, stderr: $(cat "$tmp/cfg/err")"; fi
}
badcfg "unknown key" $'rules: limits.yaml\ncolour: red\n' "$tmp/cfg/bad.yaml:2:1: unknown key: 'colour'"
badcfg "flag spelling is not a key" $'max-body-bytes: 10\n' "$tmp/cfg/bad.yaml:1:1: unknown key: 'max-body-bytes'"
badcfg "bad number" $'rules: limits.yaml\nthreads: many\n' "$tmp/cfg/bad.yaml:2:10: threads: bad value: 'many'"
badcfg "bad duration" $'idle_timeout: soon\n' "$tmp/cfg/bad.yaml:1:15: idle_timeout: bad duration: 'soon'"
badcfg "bad listen" $'listen: nowhere\n' "$tmp/cfg/bad.yaml:1:9: listen: expected HOST:PORT: 'nowhere'"
badcfg "unknown store" $'store: redis\n' "$tmp/cfg/bad.yaml:1:8: store: unknown store: 'redis'"
badcfg "bad Redis TLS name" $'redis_tls_server_name: a b\n' "$tmp/cfg/bad.yaml:1:24: redis_tls_server_name: expected a host name or an address: 'a b'"
badcfg "not a scalar" $'threads: [1, 2]\n' "$tmp/cfg/bad.yaml:1:10: threads: expected a single value"
badcfg "not a mapping" $'- rules\n' "$tmp/cfg/bad.yaml:1:1: expected a mapping"
badcfg "YAML syntax" $'rules: [x\n' "$tmp/cfg/bad.yaml:"
badcfg "duplicate key" $'threads: 1\nthreads: 2\n' "$tmp/cfg/bad.yaml:2:1:"
"$SLUICE" serve --config "$tmp/cfg/nope.yaml" 2>"$tmp/cfg/err"; st=$?
[ "$st" = 2 ] && grep -qF "$tmp/cfg/nope.yaml: cannot open" "$tmp/cfg/err" && pass "--config: missing file" ||
  bad "--config: missing file" "exit $st: $(cat "$tmp/cfg/err")"
"$SLUICE" serve --config "$SOURCE_DIR/examples/serve.yaml" --help >/dev/null && pass "--config: the example file loads" ||
  bad "--config: example" "exit $?"

# Out of memory answers 503 ENOMEM and the daemon lives on: a body larger
# than the address space allowed by ulimit -v (skipped under sanitizers,
# whose shadow memory needs more).
if grep -qaE '__(asan|tsan)_init' "$SLUICE"; then
  echo "SKIP out of memory: sanitizer build"
else
  (ulimit -v 200000; exec "$SLUICE" serve --rules "$rules" --listen 127.0.0.1:0 \
    --threads 1 --max-body-bytes 1000000000 2>"$tmp/oom.log") &
  PID=$!; pids+=("$PID")
  for _ in $(seq 200); do
    PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/oom.log")
    [ -n "$PORT" ] && break; sleep 0.05
  done
  python3 -c 'import sys; sys.stdout.write("{\"domain\": \"" + "x" * 300000000 + "\"}")' >"$tmp/huge.json"
  STATUS=$(curl -s -m 30 -o "$tmp/body" -w '%{http_code}' --data-binary @"$tmp/huge.json" "http://127.0.0.1:$PORT/v1/check")
  BODY=$(cat "$tmp/body"); rm -f "$tmp/huge.json"
  expect "out of memory: 503 ENOMEM" 503 '{"error":{"code":"ENOMEM","message":"out of memory"}}'
  call GET /healthz; expect "out of memory: the daemon lives on" 200 '"ok"'
  kill -TERM "$PID"; wait "$PID"
fi

# Every curl example of docs/server.md, docs/nginx.md and README.md runs against
# examples/rules (the README's are what ./scripts/run.sh serves); those in
# doc-test blocks run in test_docs.
start docs "$SOURCE_DIR/examples/rules"
python3 - "$tmp/docs" "$SOURCE_DIR/docs/server.md" "$SOURCE_DIR/docs/nginx.md" "$SOURCE_DIR/README.md" <<'PY' || fail=1
import os, re, sys
os.makedirs(sys.argv[1])
n = 0
for doc in sys.argv[2:]:
    text = open(doc).read()
    blocks = re.findall(r'<!-- serve-test: expect (.*?) -->\s*```sh\n(.*?)```', text, re.S)
    marked = sum(b.count("curl ") for _, b in blocks)
    # (A doc-test block, which test_docs runs, may call curl too.)
    elsewhere = sum(b.count("curl ") for b in re.findall(
        r'<!-- doc-test: .*? -->\s*```sh\n(.*?)```', text, re.S))
    total = text.count("curl ")
    if marked + elsewhere != total or not blocks:
        sys.exit(f"FAIL {doc}: {total} curl calls, {marked} in serve-test blocks"
                 f" and {elsewhere} in doc-test blocks")
    for want, cmd in blocks:
        open(f"{sys.argv[1]}/{n}.sh", "w").write(cmd)
        open(f"{sys.argv[1]}/{n}.want", "w").write(want)
        n += 1
PY
for f in "$tmp"/docs/*.sh; do
  want=$(cat "${f%.sh}.want")
  out=$(sed -e "s/127\.0\.0\.1:8080/127.0.0.1:$PORT/g" -e "s/127\.0\.0\.1:9102/127.0.0.1:$MPORT/g" "$f" | timeout 10 bash 2>&1)
  if [[ "$out" == *"$want"* ]]; then pass "docs example $(basename "$f")"; else
    bad "docs example $(basename "$f")" "expected '$want' in: $out"; fi
done
kill -TERM "$PID"; wait "$PID"; st=$?
[ "$st" = 0 ] && pass "docs daemon exits 0" || bad "docs daemon exit" "$st"

exit $fail
