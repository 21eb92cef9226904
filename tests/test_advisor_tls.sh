#!/bin/bash
# The advisor over HTTPS with a bearer token (docs/advisor.md, "Securing
# the poll"): `sluice advisor --tls-cert/--tls-key --token-file` answered
# by curl, and polled by `sluice serve --advisor https://...
# --advisor-ca --advisor-token-file`; a certificate of another CA, a
# missing or wrong token, and bad files at start, each refused with a
# message naming what is wrong.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
. "$SOURCE_DIR/tests/sh/common.sh"
scratch_with_daemons
cd "$tmp" || exit 1

# ---- the PKI ----
source "$SOURCE_DIR/tests/sh/pki.sh"
pki_ca ca sluice-test-ca
pki_ca other-ca
pki_signed server localhost ca san.ext
[ -s server.pem ] || { echo "FAIL openssl made no certificate"; exit 1; }
umask 077
echo "a-token-of-32-bytes-0123456789ab" >token
echo "not-the-advisors-token-at-all-00" >wrong
echo short >short
cat >rules.yaml <<'EOF'
domain: api
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 100, adaptive: {min: 50, max: 400}}
EOF

# port_of LOG WHO: the port a "WHO listening on 127.0.0.1:PORT" line names.
port_of() {
  for _ in $(seq 200); do
    p=$(sed -n "s/^$2:\{0,1\} listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p" "$1" | head -1)
    [ -n "$p" ] && { echo "$p"; return 0; }
    sleep 0.05
  done
  echo "FAIL $2 did not start: $(cat "$1")" >&2
  exit 1
}

# A node for the advisor to scrape.
"$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 --threads 1 \
  --metrics-listen 127.0.0.1:0 2>scraped.log &
pids+=("$!")
MPORT=$(port_of scraped.log "sluice: metrics") || exit 1

"$SLUICE" advisor --scrape "127.0.0.1:$MPORT" --listen 127.0.0.1:0 \
  --step 200ms --season 1s --horizon 200ms \
  --tls-cert server.pem --tls-key server.key --token-file token 2>advisor.log &
ADV=$!
pids+=("$ADV")
AP=$(port_of advisor.log "sluice advisor") || exit 1
URL="https://127.0.0.1:$AP/v1/recommendations"

# ---- the advisor, as curl sees it ----
code=$(curl -s -o body --cacert ca.pem -w '%{http_code}' \
  -H "Authorization: Bearer $(cat token)" "$URL")
[ "$code" = 200 ] && grep -q '"protocol":"sluice-advisor/1"' body &&
  pass "https with the token: 200 and an answer" || bad "https with the token" "$code $(cat body)"
code=$(curl -s -o body --cacert ca.pem -w '%{http_code}' -D head "$URL")
[ "$code" = 401 ] && grep -q '"code":"EAUTH"' body && grep -qi '^WWW-Authenticate: Bearer' head &&
  pass "no token: 401 EAUTH with WWW-Authenticate" || bad "no token" "$code $(cat body)"
code=$(curl -s -o body --cacert ca.pem -w '%{http_code}' \
  -H "Authorization: Bearer $(cat wrong)" "$URL")
[ "$code" = 401 ] && pass "a wrong token: 401" || bad "wrong token" "$code"
code=$(curl -s -o body --cacert ca.pem -w '%{http_code}' \
  -H "Authorization: Bearer $(cat token)x" "$URL")
[ "$code" = 401 ] && pass "the token and a byte more: 401" || bad "token+1" "$code"
curl -s -o /dev/null --cacert other-ca.pem "$URL"
[ $? = 60 ] && pass "curl refuses the advisor under another CA" || bad "other CA (curl)" "accepted"
code=$(curl -s -o body -w '%{http_code}' "http://127.0.0.1:$AP/v1/recommendations")
[ "$code" = 400 ] && pass "plain HTTP to the TLS listener: 400" || bad "plain HTTP" "$code"

# ---- serve polling it ----
# node NAME FLAGS...: a serve node polling the advisor every 200 ms; its
# metrics port in NAME.mport.
node() {
  local name=$1; shift
  "$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 --threads 1 \
    --metrics-listen 127.0.0.1:0 --advisor "https://127.0.0.1:$AP" \
    --advisor-interval 200ms "$@" 2>"$name.log" &
  pids+=("$!")
  port_of "$name.log" "sluice: metrics" >"$name.mport" || exit 1
}
polls() { # NAME RESULT: the node's count of polls with that result
  curl -s "http://127.0.0.1:$(cat "$1.mport")/metrics" |
    sed -n "s/^sluice_advisor_polls_total{result=\"$2\"} //p"
}
wait_polls() { # NAME RESULT: true once at least 2 such polls
  for _ in $(seq 100); do
    [ "$(polls "$1" "$2")" -ge 2 ] 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
node good --advisor-ca ca.pem --advisor-token-file token
wait_polls good ok && [ "$(polls good failed)" = 0 ] &&
  pass "serve polls the https advisor with its token: ok" ||
  bad "good poller" "ok $(polls good ok), failed $(polls good failed): $(cat good.log)"
node stranger --advisor-ca other-ca.pem --advisor-token-file token
wait_polls stranger failed && [ "$(polls stranger ok)" = 0 ] &&
  grep -q "advisor: tls handshake with 127.0.0.1:$AP: certificate refused" stranger.log &&
  pass "an advisor certificate of another CA: polls fail, 'certificate refused' logged" ||
  bad "stranger" "ok $(polls stranger ok): $(cat stranger.log)"
node tokenless --advisor-ca ca.pem
wait_polls tokenless failed && grep -q "advisor: answered 401" tokenless.log &&
  pass "no token: polls fail, 'answered 401' logged" ||
  bad "tokenless" "$(cat tokenless.log)"
node wrongtoken --advisor-ca ca.pem --advisor-token-file wrong
wait_polls wrongtoken failed && [ "$(polls wrongtoken ok)" = 0 ] &&
  pass "a wrong token: polls fail" || bad "wrong token poller" "$(cat wrongtoken.log)"

# ---- bad files at start ----
"$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 \
  --advisor "https://127.0.0.1:$AP" --advisor-ca /nonexistent/ca.pem 2>err
st=$?
[ $st = 2 ] && grep -q "cannot load the CA file '/nonexistent/ca.pem'" err &&
  pass "serve refuses a missing --advisor-ca, naming it" || bad "missing CA" "$st $(cat err)"
"$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 \
  --advisor "https://127.0.0.1:$AP" --advisor-token-file /nonexistent/token 2>err
st=$?
[ $st = 2 ] && grep -q -- "--advisor-token-file: cannot read '/nonexistent/token'" err &&
  pass "serve refuses a missing --advisor-token-file, naming it" || bad "missing token" "$st $(cat err)"
"$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 \
  --advisor "http://127.0.0.1:$AP" --advisor-ca ca.pem 2>err
st=$?
[ $st = 2 ] && grep -q -- "--advisor-ca: the advisor is not https://" err &&
  pass "--advisor-ca with a plain advisor is refused" || bad "CA on http" "$st $(cat err)"
"$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 --advisor "ftp://h:1" 2>err
st=$?
[ $st = 2 ] && grep -q "expected http://HOST:PORT or https://HOST:PORT" err &&
  pass "--advisor ftp:// is refused" || bad "ftp" "$st $(cat err)"
"$SLUICE" advisor --scrape "127.0.0.1:$MPORT" --listen 127.0.0.1:0 \
  --tls-cert /nonexistent/cert.pem --tls-key server.key 2>err
st=$?
[ $st = 1 ] && grep -q "/nonexistent/cert.pem" err &&
  pass "sluice advisor refuses a missing --tls-cert, naming it" || bad "advisor cert" "$st $(cat err)"
"$SLUICE" advisor --scrape "127.0.0.1:$MPORT" --listen 127.0.0.1:0 --token-file short 2>err
st=$?
[ $st = 1 ] && grep -q "the token must be at least 16 bytes" err &&
  pass "sluice advisor refuses a short token" || bad "short token" "$st $(cat err)"
"$SLUICE" advisor --scrape "127.0.0.1:$MPORT" --listen 127.0.0.1:0 --tls-cert server.pem 2>err
st=$?
[ $st = 1 ] && grep -q -- "--tls-cert and --tls-key go together" err &&
  pass "sluice advisor: a certificate without its key is refused" || bad "half pair" "$st $(cat err)"
chmod 644 token
node readable --advisor-ca ca.pem --advisor-token-file token
grep -q -- "--advisor-token-file token: mode 644 lets other users read it" readable.log &&
  pass "a token file others may read is warned about" || bad "mode warning" "$(cat readable.log)"

kill -TERM "$ADV"; wait "$ADV"; st=$?
[ "$st" = 0 ] && pass "advisor exits 0 on SIGTERM" || bad "advisor exit" "$st $(cat advisor.log)"
exit $fail
