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
  "$SLUICE" serve --rules "$rules" --listen 127.0.0.1:0 --threads 2 "$@" 2>"$tmp/$name.log" &
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

exit $fail
