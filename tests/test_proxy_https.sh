#!/bin/bash
# `sluice proxy` to an https:// upstream (docs/proxy.md, "HTTPS to the
# upstream"): a real nginx serving HTTPS with certificates of a CA made
# here with openssl, and curl through the proxy.  Requests pass and one
# keep-alive TLS connection carries them (nginx logs its connection
# number and request count); a new connection resumes the last session;
# a wrong CA and a name the certificate does not hold get 502 with the
# reason; --upstream-insecure passes anyway, with a warning; a client
# certificate for an nginx that asks for one; rate limits (429) over
# HTTPS; a reload re-reads the CA and a bad one is refused, the old kept;
# bad files refused at start.  Every server is started here on free
# loopback ports and stopped by its PID.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
command -v nginx >/dev/null || { echo "FAIL nginx is not installed (scripts/deps.sh --test)"; exit 1; }
. "$SOURCE_DIR/tests/sh/common.sh"
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
exec 2> >(grep -v 'Killed' >&2) # the trap's kills are not failures
cd "$tmp" || exit 1

# ---- the PKI ----
source "$SOURCE_DIR/tests/sh/pki.sh"
pki_ca ca sluice-test-ca
pki_ca other-ca
pki_signed server localhost ca san.ext
pki_signed client sluice-proxy ca
[ -s server.pem ] && [ -s client.pem ] || { echo "FAIL openssl made no certificates"; exit 1; }

# ---- nginx: one HTTPS server, and one that asks for a client certificate ----
NP=$(free_port) NC=$(free_port) NH=$(free_port)
mkdir -p ngx/tmp ngx/html
chmod 755 "$tmp" ngx ngx/html
chmod 1777 ngx/tmp
head -c 12000000 /dev/urandom >ngx/html/big.bin
chmod 644 ngx/html/big.bin
head -c 8000000 /dev/urandom >upload.bin
cat >ngx/nginx.conf <<EOF
worker_processes 1;
pid nginx.pid;
events { worker_connections 256; }
http {
    client_body_temp_path tmp/body;
    client_max_body_size 64m;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    # The TLS connection, its request count on it, whether its session
    # was resumed, the name the client sent.
    log_format tls '\$connection \$connection_requests \$ssl_session_reused \$ssl_protocol \$ssl_server_name \$request_uri \$request_length';
    access_log $tmp/ngx/access.log tls;
    ssl_certificate $tmp/server.pem;
    ssl_certificate_key $tmp/server.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    server {
        listen 127.0.0.1:$NP ssl;
        location / { return 200 "nginx \$request_uri\n"; }
        location /big.bin { root $tmp/ngx/html; }
        # Read whole before it is passed on (proxy_request_buffering).
        location /upload { proxy_pass http://127.0.0.1:$NH; }
        # One request per connection: each is a new TLS connection.
        location /once/ { keepalive_requests 1; return 200 "nginx \$request_uri\n"; }
    }
    server {
        listen 127.0.0.1:$NH;
        location / { return 200 "uploaded\n"; }
    }
    server {
        listen 127.0.0.1:$NC ssl;
        ssl_verify_client on;
        ssl_client_certificate $tmp/ca.pem;
        location / { return 200 "client \$ssl_client_s_dn\n"; }
    }
}
EOF
nginx -p "$tmp/ngx" -c "$tmp/ngx/nginx.conf" -e "$tmp/ngx/error.log" -g 'daemon off;' \
  >ngx/stdout.log 2>&1 &
NGINX_PID=$!
wait_port "$NP"
wait_port "$NC"

# A route limited to 3 an hour per client, the rest unlimited.
cat >rules.yaml <<'EOF'
domain: api
descriptors:
  - key: generic_key
    value: limited
    rate_limit: {unit: hour, requests_per_unit: 3}
EOF
cat >proxy.yaml <<'EOF'
upstream_ca: ca.pem
routes:
  - prefix: /limited/
    domain: api
    descriptors:
      - - generic_key: {value: limited}
EOF

# start NAME ARGS...: sets PID, PORT and MPORT (its metrics listener);
# the log is NAME.log.
start() {
  local name=$1
  shift
  "$SLUICE" proxy --rules rules.yaml --threads 1 "$@" --listen 127.0.0.1:0 \
    --metrics-listen 127.0.0.1:0 2>"$name.log" &
  PID=$!
  pids+=("$PID")
  PORT="" MPORT=""
  for _ in $(seq 200); do
    PORT=$(sed -n 's/.*\(: \|":"\)listening on 127\.0\.0\.1:\([0-9]*\).*/\2/p' "$name.log")
    MPORT=$(sed -n 's/.*metrics listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$name.log")
    [ -n "$PORT" ] && [ -n "$MPORT" ] && return 0
    sleep 0.05
  done
  echo "FAIL start $name: no 'listening on' line"; cat "$name.log"; exit 1
}
stop() { # PID: SIGTERM, and the exit status 0 (sanitizer builds: no leaks)
  kill -TERM "$1"
  wait "$1" || { bad "proxy $1 exit" "$?"; return 1; }
}
# get PORT PATH: sets STATUS and BODY.
get() {
  STATUS=$(curl -s -m 10 -o body -w '%{http_code}' "http://127.0.0.1:$1$2")
  BODY=$(cat body 2>/dev/null)
}
# metric PORT RESULT: the proxy's count of upstream handshakes so.
metric() {
  curl -s -m 5 "http://127.0.0.1:$1/metrics" |
    sed -n "s/^sluice_proxy_upstream_tls_handshakes_total{result=\"$2\"} //p"
}
# doc_block MARK: the fenced block after <!-- MARK: ... --> in docs/proxy.md.
doc_block() {
  python3 - "$SOURCE_DIR/docs/proxy.md" "$1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"<!-- " + re.escape(sys.argv[2]) + r":[^>]*-->\s*```\w*\n(.*?)```", text, re.S)
sys.stdout.write(m.group(1) if m else "")
PY
}
# The access log's lines of PATH-prefix: "CONNECTION REQUESTS REUSED PROTO SNI URI".
logged() { grep " $1" ngx/access.log; }

# ---- requests pass, on one keep-alive TLS connection ----
start a --config proxy.yaml --upstream "https://localhost:$NP"
A=$PID AP=$PORT AM=$MPORT
ok=0
for i in 1 2 3 4 5; do
  get "$AP" "/ka/$i"
  [ "$STATUS" = 200 ] && [ "$BODY" = "nginx /ka/$i" ] && ok=$((ok + 1))
done
[ "$ok" = 5 ] && pass "5 requests through the proxy over HTTPS" || bad "https requests" "$ok of 5; last $STATUS $BODY"
conns=$(logged /ka/ | cut -d' ' -f1 | sort -u | wc -l)
[ "$conns" = 1 ] && [ "$(logged /ka/5 | cut -d' ' -f2)" = 5 ] &&
  pass "one keep-alive TLS connection carried all 5 (the 5th its 5th request)" ||
  bad "keep-alive" "$(logged /ka/)"
[ "$(logged /ka/1 | cut -d' ' -f5)" = localhost ] && pass "SNI: the URL's host (localhost)" || bad "SNI" "$(logged /ka/1)"
[[ "$(logged /ka/1 | cut -d' ' -f4)" == TLSv1.3 ]] && pass "TLS 1.3 to nginx" || bad "protocol" "$(logged /ka/1)"
[ "$(metric "$AM" new)" = 1 ] && pass "metrics: 1 new upstream handshake" || bad "new handshakes" "$(metric "$AM" new)"

# ---- bodies stream both ways, under flow control ----
want=$(sha256sum <ngx/html/big.bin | cut -d' ' -f1)
got=$(curl -s -m 30 "http://127.0.0.1:$AP/big.bin" | sha256sum | cut -d' ' -f1)
[ "$got" = "$want" ] && pass "a 12 MB response arrives whole" || bad "big response" "$got"
# A client reading slowly: the proxy stops reading nginx and resumes,
# with records OpenSSL already holds read on resuming.
got=$(curl -s -m 30 --limit-rate 6M "http://127.0.0.1:$AP/big.bin" | sha256sum | cut -d' ' -f1)
[ "$got" = "$want" ] && pass "a 12 MB response to a slow client (6 MB/s) arrives whole" || bad "slow client" "$got"
out=$(curl -s -m 30 -o /dev/null -w '%{http_code}' -H 'Expect:' --data-binary @upload.bin "http://127.0.0.1:$AP/upload")
len=$(logged /upload | grep TLS | cut -d' ' -f7)
[ "$out" = 200 ] && [ "${len:-0}" -gt 8000000 ] && pass "an 8 MB upload reaches nginx over TLS ($len bytes)" || bad "upload" "$out $(logged /upload)"
seq 1 40 | xargs -P 8 -I{} curl -s -m 10 -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$AP/par/{}" >par.out
[ "$(grep -c '^200$' par.out)" = 40 ] && pass "40 requests 8 at a time: all 200" || bad "parallel" "$(sort par.out | uniq -c)"

# ---- a new connection resumes the last session ----
# Each /once/ request closes the connection it went on; the first ones
# may use connections the parallel requests left in the pool, so ten are
# sent, and those on new connections (their first request) must have
# resumed the session.
once=0
for i in $(seq 10); do get "$AP" "/once/$i"; [ "$STATUS $BODY" = "200 nginx /once/$i" ] && once=$((once + 1)); done
[ "$once" = 10 ] || bad "/once/" "$once of 10 answered"
# nginx logs a request after its answer is sent: wait for the lines.
for _ in $(seq 100); do [ "$(logged /once/ | wc -l)" -ge 10 ] && break; sleep 0.05; done
fresh=$(logged /once/ | awk '$2 == 1' | wc -l)
resumed=$(logged /once/ | awk '$2 == 1 && $3 == "r"' | wc -l)
[ "$fresh" -ge 2 ] && [ "$resumed" = "$fresh" ] &&
  pass "new connections resume the TLS session ($resumed of $fresh; nginx: reused)" ||
  bad "resumption" "$resumed of $fresh new connections resumed: $(logged /once/)"
r=$(metric "$AM" resumed)
[ "${r:-0}" -ge 2 ] && pass "metrics: $r resumed upstream handshakes" || bad "resumed metric" "$r"

# ---- rate limits still decide over HTTPS ----
codes=""
for i in 1 2 3 4 5; do get "$AP" "/limited/$i"; codes="$codes $STATUS"; done
[ "$codes" = " 200 200 200 429 429" ] && [[ "$BODY" == *'"code":"rate_limited"'* ]] &&
  pass "a limit of 3: 200 200 200 429 429" || bad "rate limit" "$codes $BODY"
[ "$(logged /limited/ | wc -l)" = 3 ] && pass "nginx saw only the 3 allowed" || bad "limited seen" "$(logged /limited/)"

# ---- reload: the CA re-read; a bad one refused, the old kept ----
sed 's/^upstream_ca: .*/upstream_ca: missing.pem/' proxy.yaml >p.yaml && mv p.yaml proxy.yaml
kill -HUP "$A"
for _ in $(seq 50); do grep -q "config reload failed" a.log && break; sleep 0.1; done
grep -q "config reload failed: --upstream-ca 'missing.pem': No such file or directory" a.log &&
  pass "a bad CA file on reload: refused, naming it" || bad "bad reload" "$(grep reload a.log)"
get "$AP" /after-bad-reload
[ "$STATUS" = 200 ] && pass "the config in force stays" || bad "after a bad reload" "$STATUS $BODY"
sed 's/^upstream_ca: .*/upstream_ca: other-ca.pem/' proxy.yaml >p.yaml && mv p.yaml proxy.yaml
kill -HUP "$A"
for _ in $(seq 50); do grep -q "config reloaded" a.log && break; sleep 0.1; done
get "$AP" /after-reload
[ "$STATUS" = 502 ] && [[ "$BODY" == *'"code":"bad_gateway"'*'upstream TLS: certificate verify failed'* ]] &&
  pass "SIGHUP re-reads the CA: another CA's now, 502" || bad "reload CA" "$STATUS $BODY"
sed 's/^upstream_ca: .*/upstream_ca: ca.pem/' proxy.yaml >p.yaml && mv p.yaml proxy.yaml
kill -HUP "$A"
for _ in $(seq 50); do [ "$(grep -c "config reloaded" a.log)" = 2 ] && break; sleep 0.1; done
get "$AP" /back
[ "$STATUS" = 200 ] && pass "and back to the right CA: 200" || bad "reload back" "$STATUS $BODY"
stop "$A" && pass "SIGTERM: exit 0" || bad "exit" "$?"

# ---- a wrong CA: 502 naming the failure, counted ----
start b --upstream "https://127.0.0.1:$NP" --upstream-ca other-ca.pem
get "$PORT" /wrong-ca
want=$(doc_block proxy-https-502)
[ "$STATUS" = 502 ] && [ -n "$want" ] && [ "$BODY" = "$want" ] &&
  pass "a wrong CA: 502 with the JSON error docs/proxy.md shows" || bad "wrong CA" "$STATUS $BODY (docs: $want)"
m=$(curl -s -m 5 "http://127.0.0.1:$MPORT/metrics")
grep -q '^sluice_proxy_requests_total{route="_none_",outcome="bad_gateway"} 1$' <<<"$m" &&
  grep -q '^sluice_proxy_upstream_tls_handshakes_total{result="failed"} 1$' <<<"$m" &&
  pass "counted: bad_gateway and a failed handshake" || bad "wrong CA metrics" "$(grep -E 'bad_gateway|tls_hand' <<<"$m")"
[ "$(logged /wrong-ca | wc -l)" = 0 ] && pass "nothing reached nginx" || bad "wrong CA reached" "$(logged /wrong-ca)"
stop "$PID"

# ---- the name checked: the URL's, or --upstream-server-name ----
start c --upstream "https://127.0.0.1:$NP" --upstream-ca ca.pem --upstream-server-name wrong.example
get "$PORT" /wrong-name
[ "$STATUS" = 502 ] && [[ "$BODY" == *'upstream TLS: certificate verify failed: hostname mismatch'* ]] &&
  pass "a name the certificate does not hold: 502 hostname mismatch" || bad "hostname mismatch" "$STATUS $BODY"
stop "$PID"
start d --upstream "https://127.0.0.1:$NP" --upstream-ca ca.pem --upstream-server-name localhost
get "$PORT" /by-name
[ "$STATUS" = 200 ] && [ "$(logged /by-name | cut -d' ' -f5)" = localhost ] &&
  pass "--upstream-server-name localhost: sent as SNI and checked" || bad "server name" "$STATUS $BODY $(logged /by-name)"
stop "$PID"
start e --upstream "https://127.0.0.1:$NP" --upstream-ca ca.pem
get "$PORT" /by-address
[ "$STATUS" = 200 ] && [ "$(logged /by-address | cut -d' ' -f5)" = "-" ] &&
  pass "an address in the URL: checked against the certificate's IP, no SNI" || bad "by address" "$STATUS $BODY $(logged /by-address)"
stop "$PID"

# ---- --upstream-insecure: passes with the wrong CA, loudly ----
start f --upstream "https://127.0.0.1:$NP" --upstream-ca other-ca.pem --upstream-insecure true --log-format json
get "$PORT" /insecure
[ "$STATUS" = 200 ] && pass "--upstream-insecure true: the wrong CA passes" || bad "insecure" "$STATUS $BODY"
grep -q "\"level\":\"warn\",.*--upstream-insecure: the certificate of https://127.0.0.1:$NP is NOT verified" f.log &&
  pass "--upstream-insecure: a WARN at start" || bad "insecure warning" "$(cat f.log)"
stop "$PID"

# ---- a client certificate for an nginx that asks for one ----
start g --upstream "https://localhost:$NC" --upstream-ca ca.pem --upstream-cert client.pem --upstream-key client.key
get "$PORT" /mtls
[ "$STATUS" = 200 ] && [ "$BODY" = "client CN=sluice-proxy" ] &&
  pass "--upstream-cert: nginx's ssl_verify_client accepts the proxy" || bad "client cert" "$STATUS $BODY"
stop "$PID"
# docs/proxy.md's config block, its names and port the test's.
doc_block proxy-https-config | sed -e "s#https://api.internal:8443#https://localhost:$NC#" \
  -e "s#upstream_server_name: api.internal#upstream_server_name: localhost#" \
  -e "s#/etc/sluice/upstream-ca.pem#ca.pem#" -e "s#/etc/sluice/proxy-client.pem#client.pem#" \
  -e "s#/etc/sluice/proxy-client.key#client.key#" >doc.yaml
[ "$(grep -c upstream doc.yaml)" = 5 ] && ! grep -q 'api.internal\|/etc/sluice' doc.yaml ||
  bad "docs/proxy.md's config block" "$(cat doc.yaml)"
start doc --config doc.yaml
get "$PORT" /doc-config
[ "$STATUS" = 200 ] && [ "$BODY" = "client CN=sluice-proxy" ] &&
  pass "docs/proxy.md's config: CA, server name and client certificate" || bad "doc config" "$STATUS $BODY"
stop "$PID"
# Without one, nginx finishes the handshake and answers 400 itself
# (ssl_verify_client's way); the proxy passes that on.
start h --upstream "https://localhost:$NC" --upstream-ca ca.pem
get "$PORT" /no-cert
[ "$STATUS" = 400 ] && [[ "$BODY" == *"No required SSL certificate was sent"* ]] &&
  pass "without a client certificate: nginx's 400" || bad "no client cert" "$STATUS $BODY"
stop "$PID"
# A server that refuses the handshake without one (openssl s_server
# -Verify): 502 naming TLS's alert.
SP=$(free_port)
openssl s_server -accept "127.0.0.1:$SP" -cert server.pem -key server.key -CAfile ca.pem \
  -Verify 1 -www -quiet >s_server.log 2>&1 &
SPID=$!
pids+=("$SPID")
wait_port "$SP"
start i --upstream "https://localhost:$SP" --upstream-ca ca.pem
get "$PORT" /refused
[ "$STATUS" = 502 ] && [[ "$BODY" == *'"code":"bad_gateway","message":"upstream TLS: '* ]] &&
  pass "a handshake refused for want of a client certificate: 502 ($BODY)" || bad "refused handshake" "$STATUS $BODY"
stop "$PID"
kill "$SPID"

# ---- bad settings refused at start: exit 2, naming the file ----
printf 'not a certificate\n' >bad.pem
refused() { # WANT ARGS...: exit 2 and WANT in stderr
  local want=$1
  shift
  out=$("$SLUICE" proxy --rules rules.yaml --listen 127.0.0.1:0 "$@" 2>&1)
  st=$?
  [ "$st" = 2 ] && [[ "$out" == *"$want"* ]]
}
refused "sluice proxy: --upstream-ca 'bad.pem': no certificate or crl found" --upstream "https://localhost:$NP" --upstream-ca bad.pem &&
  pass "a bad --upstream-ca: exit 2, naming it" || bad "bad CA" "exit $st: $out"
refused "--upstream-ca 'missing.pem': No such file or directory" --upstream "https://localhost:$NP" --upstream-ca missing.pem &&
  pass "a missing --upstream-ca: exit 2, naming it" || bad "missing CA" "exit $st: $out"
refused "--upstream-cert 'bad.pem': no start line" --upstream "https://localhost:$NP" --upstream-cert bad.pem --upstream-key client.key &&
  pass "a bad --upstream-cert: exit 2, naming it" || bad "bad cert" "exit $st: $out"
refused "--upstream-key 'server.key' does not match --upstream-cert 'client.pem'" \
  --upstream "https://localhost:$NP" --upstream-cert client.pem --upstream-key server.key &&
  pass "a key of another certificate: exit 2, naming both" || bad "mismatched key" "exit $st: $out"
refused "--upstream-cert and --upstream-key go together" --upstream "https://localhost:$NP" --upstream-cert client.pem &&
  pass "--upstream-cert without --upstream-key refused" || bad "cert alone" "exit $st: $out"
refused "--upstream-ca needs an https:// upstream: 'http://localhost:$NP'" --upstream "http://localhost:$NP" --upstream-ca ca.pem &&
  pass "TLS settings with an http:// upstream refused" || bad "http with CA" "exit $st: $out"

# Sanitizer builds: nothing reported by any proxy.
reports=$(grep -l 'Sanitizer\|runtime error' ./*.log 2>/dev/null)
[ -z "$reports" ] && pass "no sanitizer reports" || bad "sanitizer reports" "$(cat $reports | head -40)"

[ "$fail" = 0 ] && echo "all upstream HTTPS checks passed"
exit "$fail"
