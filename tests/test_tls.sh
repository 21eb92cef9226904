#!/bin/bash
# TLS on every listener (docs/operations.md, "TLS"): a CA, server and
# client certificates made with openssl here; `sluice serve` with TLS on
# its HTTP, gRPC, Redis protocol, admin and metrics listeners, driven by
# curl, openssl s_client (versions, ALPN, resumption), redis-cli --tls
# and grpc-js; mutual TLS with a right, a missing and a wrong client
# certificate; plain text to a TLS port; a client that never finishes
# its handshake; the certificate reloaded on SIGHUP (a keep-alive
# connection going on across it) and a bad one refused; `sluice proxy`
# terminating TLS; and bad files refused at start.
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
pki_signed server2 localhost ca san.ext
pki_signed client client ca
pki_signed stranger stranger other-ca
[ -s server.pem ] && [ -s client.pem ] && [ -s stranger.pem ] || { echo "FAIL openssl made no certificates"; exit 1; }
serial() { openssl x509 -noout -serial -in "$1" | cut -d= -f2; }

printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n' >rules.yaml
printf 'a-long-admin-s3cret-token\n' >token
chmod 600 token
cp server.pem live.pem
cp server.key live.key

port_of() { # LOG WHO -> the port of "WHO listening on 127.0.0.1:PORT"
  for _ in $(seq 100); do
    p=$(sed -n "s/^$2 listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p" "$1" | head -1)
    [ -n "$p" ] && { echo "$p"; return 0; }
    sleep 0.05
  done
  return 1
}

# ---- serve: every listener under TLS ----
"$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 --threads 2 \
  --grpc-listen 127.0.0.1:0 --resp-listen 127.0.0.1:0 \
  --metrics-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --admin-token-file token --read-timeout 1s \
  --tls-cert live.pem --tls-key live.key 2>a.log &
A=$!
pids+=("$A")
HP=$(port_of a.log "sluice:") && GP=$(port_of a.log "sluice: grpc") &&
  RP=$(port_of a.log "sluice: resp") && MP=$(port_of a.log "sluice: metrics") &&
  AP=$(port_of a.log "sluice: admin") || { echo "FAIL serve did not start"; cat a.log; exit 1; }
CURL=(curl -s -m 5 --cacert ca.pem)
body='{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"u1"}]}]}'

out=$("${CURL[@]}" -X POST "https://localhost:$HP/v1/check" -d "$body" --resolve "localhost:$HP:127.0.0.1")
[[ "$out" == *'"overall":"OK"'* ]] && pass "https: POST /v1/check decides" || bad "https /v1/check" "$out"
out=$("${CURL[@]}" -X POST "https://127.0.0.1:$HP/json" -d "$body")
[[ "$out" == *'"overallCode":"OK"'* ]] && pass "https: POST /json (lyft's) decides" || bad "https /json" "$out"

out=$(curl -s -m 5 -i "http://127.0.0.1:$HP/healthz")
[[ "$out" == "HTTP/1.1 400"* && "$out" == *'"code":"ETLS"'* ]] &&
  pass "plain HTTP to the TLS port: 400 ETLS in plain text" || bad "plain text" "$out"
out=$(python3 -c "
import socket
s = socket.create_connection(('127.0.0.1', $RP), 5)
s.sendall(b'PING\r\n')
print(s.recv(100).decode())")
[[ "$out" == *"-ERR this port speaks TLS"* ]] && pass "plain RESP to the TLS port: an error reply" || bad "plain RESP" "$out"

sc() { timeout 10 openssl s_client -connect "127.0.0.1:$1" -CAfile ca.pem -verify_return_error "${@:2}" </dev/null 2>&1; }
out=$(sc "$HP" -tls1_1)
[[ "$out" == *"New, (NONE)"* && "$out" == *"alert protocol version"* ]] && pass "TLS 1.1 refused" || bad "TLS 1.1" "$(echo "$out" | tail -3)"
out=$(sc "$HP" -tls1_2)
[[ "$out" == *"New, TLSv1.2"* && "$out" == *"Verify return code: 0"* ]] && pass "TLS 1.2, the certificate verified" || bad "TLS 1.2" "$(echo "$out" | grep -E 'New,|Verify|Cipher')"
[[ "$out" == *"Cipher    : ECDHE-"* ]] && pass "TLS 1.2: an ECDHE cipher" || bad "TLS 1.2 cipher" "$(echo "$out" | grep Cipher)"
out=$(sc "$HP" -tls1_3)
[[ "$out" == *"New, TLSv1.3"* ]] && pass "TLS 1.3" || bad "TLS 1.3" "$(echo "$out" | grep -E 'New,|Verify')"
out=$(sc "$HP" -tls1_2 -cipher AES128-SHA)
[[ "$out" == *"New, (NONE)"* && "$out" == *"alert handshake failure"* ]] && pass "TLS 1.2 without forward secrecy refused" || bad "weak cipher" "$(echo "$out" | grep Cipher)"
# TLS 1.3 sends its ticket after the handshake: the client stays a moment
# to take it.
sleep 1 | timeout 10 openssl s_client -connect "127.0.0.1:$HP" -CAfile ca.pem -tls1_3 -sess_out sess.pem >/dev/null 2>&1
out=$(sc "$HP" -tls1_3 -sess_in sess.pem)
[[ "$out" == *"Reused, TLSv1.3"* ]] && pass "TLS 1.3 session resumed from its ticket" || bad "resumption" "$(echo "$out" | grep -E 'New|Reused')"
out=$(sc "$HP" -tls1_2 -reconnect)
[ "$(grep -c '^Reused, TLSv1.2' <<<"$out")" -ge 5 ] && pass "TLS 1.2 session resumed from the cache" || bad "1.2 resumption" "$(grep -cE '^(New|Reused)' <<<"$out")"
out=$(sc "$HP" -alpn h2,http/1.1)
[[ "$out" == *"ALPN protocol: http/1.1"* ]] && pass "ALPN on the HTTP listener: http/1.1" || bad "ALPN http" "$(echo "$out" | grep -i alpn)"
out=$(sc "$GP" -alpn h2)
[[ "$out" == *"ALPN protocol: h2"* ]] && pass "ALPN on the gRPC listener: h2" || bad "ALPN h2" "$(echo "$out" | grep -i alpn)"
out=$(sc "$GP" -alpn http/1.1)
[[ "$out" == *"no application protocol"* || "$out" == *"alert"* ]] && [[ "$out" != *"ALPN protocol: http/1.1"* ]] &&
  pass "gRPC listener without h2: refused" || bad "gRPC without h2" "$(echo "$out" | grep -iE 'alpn|alert' | head -2)"

out=$(redis-cli --tls --cacert ca.pem -h 127.0.0.1 -p "$RP" PING 2>&1)
[ "$out" = PONG ] && pass "redis-cli --tls: PING" || bad "redis-cli PING" "$out"
out=$(redis-cli --tls --cacert ca.pem -h 127.0.0.1 -p "$RP" CL.THROTTLE tls-key 1 5 60 1 2>&1 | head -1)
[ "$out" = 0 ] && pass "redis-cli --tls: CL.THROTTLE decides" || bad "CL.THROTTLE" "$out"

GRPC_CLIENT="$SOURCE_DIR/tests/grpc/client.js"
if [ -d "$SOURCE_DIR/tests/grpc/node_modules" ]; then
  out=$(GRPC_TLS_CA=ca.pem timeout 20 node "$GRPC_CLIENT" "127.0.0.1:$GP" \
    '[{"op":"health","service":""},{"op":"rls","req":{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"g1"}]}]}}]' 2>&1)
  [[ "$out" == *'"status":"SERVING"'* && "$out" == *'"overall_code":"OK"'* ]] &&
    pass "grpc-js over TLS: health and ShouldRateLimit" || bad "grpc-js TLS" "$out"
else
  bad "grpc-js" "tests/grpc/node_modules missing (scripts/deps.sh --test)"
fi

out=$("${CURL[@]}" -H 'Authorization: Bearer a-long-admin-s3cret-token' "https://127.0.0.1:$AP/admin/v1/limits")
[[ "$out" == *'"rules"'* || "$out" == *'"id"'* ]] && pass "admin API over TLS" || bad "admin TLS" "$out"

# A client that opens a connection and never finishes its handshake is
# closed after --read-timeout (1 s), holding nothing past it.
t0=$(date +%s%N)
out=$(python3 -c "
import socket
s = socket.create_connection(('127.0.0.1', $HP), 10)
s.sendall(bytes([0x16, 3, 1, 0, 200]))   # a record header, then nothing
print(repr(s.recv(100)))")
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$out" = "b''" ] && [ "$ms" -ge 800 ] && [ "$ms" -lt 4000 ] &&
  pass "an unfinished handshake closed after the read timeout ($ms ms)" || bad "handshake timeout" "$out after $ms ms"

# Handshakes that ended so, summed over the listeners.
handshakes() { # METRICS RESULT
  awk -v r="result=\"$2\"}" 'index($1, "sluice_tls_handshakes_total{") == 1 && index($1, r) { n += $2 } END { print n + 0 }' <<<"$1"
}
m=$("${CURL[@]}" "https://127.0.0.1:$MP/metrics")
ok=$(handshakes "$m" ok)
pt=$(handshakes "$m" plaintext)
to=$(handshakes "$m" timeout)
[ "${ok:-0}" -ge 10 ] && [ "${pt:-0}" -ge 2 ] && [ "${to:-0}" -ge 1 ] &&
  pass "/metrics counts handshakes: ok $ok, plaintext $pt, timeout $to" || bad "tls metrics" "$(grep tls_ <<<"$m")"

# ---- reload: a new certificate on SIGHUP, a bad one refused ----
served_serial() { sc "$HP" | openssl x509 -noout -serial 2>/dev/null | cut -d= -f2; }
[ "$(served_serial)" = "$(serial server.pem)" ] || bad "serial before reload" "$(served_serial)"
python3 - "$HP" "$tmp" <<'PY' &
# One keep-alive TLS connection across the reloads: a request every 100 ms.
import socket, ssl, sys, time
port, tmp = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=tmp + "/ca.pem")
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), 5), server_hostname="localhost")
f = s.makefile("rb")
good = 0
for i in range(30):
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    line = f.readline()
    while f.readline() not in (b"\r\n", b""):
        pass
    f.read(16)  # {"status":"ok"}\n has 16 bytes
    good += line.startswith(b"HTTP/1.1 200")
    time.sleep(0.1)
open(tmp + "/keepalive.out", "w").write(str(good))
PY
KA=$!
sleep 0.5
cp server2.pem live.pem
cp server2.key live.key
kill -HUP "$A"
for _ in $(seq 50); do grep -q "certificate and key reloaded" a.log && break; sleep 0.1; done
[ "$(served_serial)" = "$(serial server2.pem)" ] &&
  pass "SIGHUP: new connections get the new certificate" || bad "reload" "$(served_serial) vs $(serial server2.pem)"
printf 'not a certificate\n' >live.pem
kill -HUP "$A"
for _ in $(seq 50); do grep -q "tls reload refused" a.log && break; sleep 0.1; done
grep -q "tls reload refused, the certificate in force stays on the http, .* listeners: --tls-cert '.*live.pem'" a.log &&
  pass "a bad certificate on reload: refused, naming the file" || bad "bad reload" "$(grep tls a.log)"
[ "$(served_serial)" = "$(serial server2.pem)" ] && pass "a bad certificate on reload: the old one stays" || bad "old stays" "$(served_serial)"
wait "$KA"
[ "$(cat keepalive.out 2>/dev/null)" = 30 ] &&
  pass "a keep-alive connection went on across both reloads (30 of 30)" || bad "keep-alive across reload" "$(cat keepalive.out 2>/dev/null)"
kill -TERM "$A"
wait "$A" && pass "serve under TLS: SIGTERM, exit 0" || bad "exit" "$?"

# ---- mutual TLS ----
"$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 --threads 1 \
  --grpc-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --tls-cert server.pem --tls-key server.key --tls-client-ca ca.pem 2>b.log &
B=$!
pids+=("$B")
HP=$(port_of b.log "sluice:") && GP=$(port_of b.log "sluice: grpc") &&
  MP=$(port_of b.log "sluice: metrics") || { echo "FAIL serve (mTLS) did not start"; cat b.log; exit 1; }
out=$("${CURL[@]}" --cert client.pem --key client.key "https://127.0.0.1:$HP/healthz")
[ "$out" = '{"status":"ok"}' ] && pass "mTLS: a client certificate of the CA" || bad "mTLS good cert" "$out"
"${CURL[@]}" "https://127.0.0.1:$HP/healthz" >/dev/null
rc=$?
[ "$rc" -ne 0 ] && pass "mTLS: no client certificate refused in the handshake (curl $rc)" || bad "mTLS no cert" "curl exit 0"
"${CURL[@]}" --cert stranger.pem --key stranger.key "https://127.0.0.1:$HP/healthz" >/dev/null
rc=$?
[ "$rc" -ne 0 ] && pass "mTLS: another CA's certificate refused (curl $rc)" || bad "mTLS stranger" "curl exit 0"
if [ -d "$SOURCE_DIR/tests/grpc/node_modules" ]; then
  out=$(GRPC_TLS_CA=ca.pem GRPC_TLS_CERT=client.pem GRPC_TLS_KEY=client.key timeout 20 node "$GRPC_CLIENT" \
    "127.0.0.1:$GP" '[{"op":"health","service":""}]' 2>&1)
  [[ "$out" == *'"status":"SERVING"'* ]] && pass "grpc-js with a client certificate (mTLS)" || bad "grpc-js mTLS" "$out"
  out=$(GRPC_TLS_CA=ca.pem timeout 20 node "$GRPC_CLIENT" "127.0.0.1:$GP" '[{"op":"health","service":""}]' 2>&1)
  [[ "$out" == *'"code":14'* ]] && pass "grpc-js without one: UNAVAILABLE" || bad "grpc-js no cert" "$out"
fi
m=$("${CURL[@]}" --cert client.pem --key client.key "https://127.0.0.1:$MP/metrics")
cc=$(handshakes "$m" client_certificate)
[ "${cc:-0}" -ge 2 ] && pass "/metrics counts refused client certificates ($cc)" || bad "client cert metric" "$(grep tls_ <<<"$m")"
kill -TERM "$B"
wait "$B"

# ---- sluice proxy terminating TLS ----
UP=$(free_port)
python3 -m http.server "$UP" --bind 127.0.0.1 --directory "$tmp" >/dev/null 2>&1 &
pids+=("$!")
wait_port "$UP"
"$SLUICE" proxy --rules rules.yaml --listen 127.0.0.1:0 --threads 1 \
  --upstream "http://127.0.0.1:$UP" --tls-cert server.pem --tls-key server.key 2>p.log &
PX=$!
pids+=("$PX")
PP=$(port_of p.log "sluice:") || { echo "FAIL proxy did not start"; cat p.log; exit 1; }
out=$("${CURL[@]}" "https://127.0.0.1:$PP/rules.yaml")
[[ "$out" == "domain: api"* ]] && pass "sluice proxy over TLS: forwarded to the upstream" || bad "proxy TLS" "$out"
out=$(curl -s -m 5 "http://127.0.0.1:$PP/rules.yaml")
[[ "$out" == *'"code":"ETLS"'* ]] && pass "sluice proxy: plain HTTP to its TLS port refused" || bad "proxy plain" "$out"
kill -TERM "$PX"
wait "$PX"

# ---- bad files at start: refused, naming the file ----
start_err() { "$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 "$@" 2>&1 & local p=$!; sleep 1.5; kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; }
out=$(start_err --tls-cert server.pem)
[[ "$out" == *"--tls-cert needs --tls-key"* ]] && pass "--tls-cert without --tls-key refused" || bad "no key" "$out"
out=$(start_err --tls-cert server.pem --tls-key client.key)
[[ "$out" == *"--tls-key 'client.key' does not match --tls-cert 'server.pem'"* ]] && pass "a key of another certificate refused, naming both" || bad "mismatched key" "$out"
out=$(start_err --tls-cert missing.pem --tls-key server.key)
[[ "$out" == *"--tls-cert 'missing.pem'"* || "$out" == *"missing.pem"* ]] && pass "a missing certificate refused, naming it" || bad "missing cert" "$out"
out=$(start_err --tls-cert server.pem --tls-key server.key --tls-client-ca token)
[[ "$out" == *"--tls-client-ca"* ]] && pass "a bad client CA file refused, naming it" || bad "bad client CA" "$out"

[ "$fail" = 0 ] && echo "all TLS checks passed"
exit "$fail"
