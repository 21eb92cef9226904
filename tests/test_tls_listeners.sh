#!/bin/bash
# A certificate per listener (docs/operations.md, "TLS"): two test CAs
# and their certificates made with openssl here; `sluice serve` with the
# shared files on the HTTP, Redis protocol and metrics listeners, the
# gRPC listener's own certificate without a client CA, and the admin
# listener's own certificate and client CA; each listener presenting its
# own (openssl s_client -verify_return_error); mutual TLS where the files
# ask for it and nowhere else (curl, grpc-js); the admin listener alone
# over TLS with the HTTP listener plain; the handshake series by
# listener; a reload that refuses one listener's bad file while the
# others take their new ones; `sluice proxy`'s admin listener; and half
# a pair refused at start.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
. "$SOURCE_DIR/tests/sh/common.sh"
scratch_with_daemons
cd "$tmp" || exit 1

# ---- the PKI: CA a signs the shared and gRPC certificates and client a,
# CA b the admin certificate and client b ----
source "$SOURCE_DIR/tests/sh/pki.sh"
pki_ca ca-a
pki_ca ca-b
for n in shared shared2 grpc grpc2; do pki_signed $n $n ca-a san.ext; done
pki_signed admin admin ca-b san.ext
pki_signed admin2 admin2 ca-b san.ext
pki_signed client-a client-a ca-a
pki_signed client-b client-b ca-b
[ -s shared.pem ] && [ -s admin.pem ] && [ -s client-b.pem ] || { echo "FAIL openssl made no certificates"; exit 1; }
for f in shared grpc admin; do cp $f.pem live-$f.pem; cp $f.key live-$f.key; done
serial() { openssl x509 -noout -serial -in "$1" | cut -d= -f2; }
printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n' >rules.yaml

port_of() { # LOG WHO -> the port of "WHO listening on 127.0.0.1:PORT"
  for _ in $(seq 100); do
    p=$(sed -n "s/^$2 listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p" "$1" | head -1)
    [ -n "$p" ] && { echo "$p"; return 0; }
    sleep 0.05
  done
  return 1
}
# The certificate a listener presents, verified against CA (the
# handshake fails otherwise): its subject and serial.
presented() { # PORT CA [s_client args]
  timeout 10 openssl s_client -connect "127.0.0.1:$1" -CAfile "$2.pem" -verify_return_error \
    -showcerts "${@:3}" </dev/null 2>/dev/null | openssl x509 -noout -subject -serial 2>/dev/null |
    sed -n 's/^subject=CN *= *//p; s/^serial=//p' | paste -sd ' '
}
is_presented() { # WHAT PORT CA EXPECTED-NAME [s_client args]
  local got
  got=$(presented "$2" "$3" "${@:5}")
  [ "$got" = "$4 $(serial "$4.pem")" ] && pass "$1: presents $4's certificate, verified by $3" || bad "$1" "got '$got', wanted $4 $(serial "$4.pem")"
}
handshakes() { # METRICS LISTENER RESULT -> the count
  sed -n "s/^sluice_tls_handshakes_total{listener=\"$2\",result=\"$3\"} //p" <<<"$1"
}
ADMIN_B=(--cert client-b.pem --key client-b.key)

# ---- serve: shared, gRPC's own, admin's own with its client CA ----
"$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 --threads 2 \
  --grpc-listen 127.0.0.1:0 --resp-listen 127.0.0.1:0 \
  --metrics-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --tls-cert live-shared.pem --tls-key live-shared.key --tls-client-ca ca-a.pem \
  --grpc-tls-cert live-grpc.pem --grpc-tls-key live-grpc.key \
  --admin-tls-cert live-admin.pem --admin-tls-key live-admin.key \
  --admin-tls-client-ca ca-b.pem 2>a.log &
A=$!
pids+=("$A")
HP=$(port_of a.log "sluice:") && GP=$(port_of a.log "sluice: grpc") &&
  RP=$(port_of a.log "sluice: resp") && MP=$(port_of a.log "sluice: metrics") &&
  AP=$(port_of a.log "sluice: admin") || { echo "FAIL serve did not start"; cat a.log; exit 1; }
CLIENT_A=(--cert client-a.pem --key client-a.key)

is_presented "http listener" "$HP" ca-a shared -cert client-a.pem -key client-a.key
is_presented "resp listener" "$RP" ca-a shared -cert client-a.pem -key client-a.key
is_presented "metrics listener" "$MP" ca-a shared -cert client-a.pem -key client-a.key
is_presented "grpc listener (--grpc-tls-cert)" "$GP" ca-a grpc -alpn h2
is_presented "admin listener (--admin-tls-cert)" "$AP" ca-b admin -cert client-b.pem -key client-b.key
curl -s -m 5 --cacert ca-a.pem "${ADMIN_B[@]}" "https://127.0.0.1:$AP/admin/v1/limits" >/dev/null
rc=$?
[ "$rc" = 60 ] && pass "admin listener: its certificate does not verify by the shared CA (curl 60)" || bad "admin under ca-a" "curl $rc"

# The shared client CA holds where the shared files are in force; a
# listener's own files replace it: none on gRPC, CA b on admin.
out=$(curl -s -m 5 --cacert ca-a.pem "${CLIENT_A[@]}" "https://127.0.0.1:$HP/healthz")
[ "$out" = '{"status":"ok"}' ] && pass "http: client a's certificate (the shared client CA)" || bad "http mTLS" "$out"
curl -s -m 5 --cacert ca-a.pem "https://127.0.0.1:$HP/healthz" >/dev/null
rc=$?
[ "$rc" -ne 0 ] && pass "http: no client certificate refused (curl $rc)" || bad "http no cert" "curl exit 0"
out=$(curl -s -m 5 --cacert ca-b.pem "${ADMIN_B[@]}" "https://127.0.0.1:$AP/admin/v1/limits")
[[ "$out" == *'"rules"'* || "$out" == *'"id"'* ]] && pass "admin: client b's certificate (its own client CA)" || bad "admin mTLS" "$out"
curl -s -m 5 --cacert ca-b.pem "${CLIENT_A[@]}" "https://127.0.0.1:$AP/admin/v1/limits" >/dev/null
rc=$?
[ "$rc" -ne 0 ] && pass "admin: client a's certificate (the shared CA's) refused (curl $rc)" || bad "admin shared CA" "curl exit 0"
curl -s -m 5 --cacert ca-b.pem "https://127.0.0.1:$AP/admin/v1/limits" >/dev/null
rc=$?
[ "$rc" -ne 0 ] && pass "admin: no client certificate refused (curl $rc)" || bad "admin no cert" "curl exit 0"
if [ -d "$SOURCE_DIR/tests/grpc/node_modules" ]; then
  out=$(GRPC_TLS_CA=ca-a.pem timeout 20 node "$SOURCE_DIR/tests/grpc/client.js" "127.0.0.1:$GP" \
    '[{"op":"rls","req":{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"g1"}]}]}}]' 2>&1)
  [[ "$out" == *'"overall_code":"OK"'* ]] &&
    pass "grpc-js without a client certificate: its own files ask for none" || bad "grpc-js" "$out"
else
  bad "grpc-js" "tests/grpc/node_modules missing (scripts/deps.sh --test)"
fi
out=$(redis-cli --tls --cacert ca-a.pem --cert client-a.pem --key client-a.key -h 127.0.0.1 -p "$RP" PING 2>&1)
[ "$out" = PONG ] && pass "redis-cli --tls with client a: the shared files" || bad "redis-cli" "$out"

m=$(curl -s -m 5 --cacert ca-a.pem "${CLIENT_A[@]}" "https://127.0.0.1:$MP/metrics")
n=$(handshakes "$m" grpc ok)
[ "${n:-0}" -ge 2 ] && pass "metrics: sluice_tls_handshakes_total{listener=\"grpc\",result=\"ok\"} $n" || bad "grpc ok series" "$(grep tls_ <<<"$m")"
n=$(handshakes "$m" admin client_certificate)
[ "${n:-0}" -ge 2 ] && pass "metrics: {listener=\"admin\",result=\"client_certificate\"} $n" || bad "admin cc series" "$(grep tls_ <<<"$m")"
n=$(handshakes "$m" http client_certificate)
[ "${n:-0}" -ge 1 ] && pass "metrics: {listener=\"http\",result=\"client_certificate\"} $n" || bad "http cc series" "$(grep tls_ <<<"$m")"
n=$(grep -c '^sluice_tls_handshakes_total{listener="\(http\|grpc\|resp\|metrics\|admin\)",result=' <<<"$m")
[ "$n" = 25 ] && pass "metrics: five results for each of the five listeners" || bad "series count" "$n"

# ---- reload: shared and gRPC renewed, admin's new file bad ----
cp shared2.pem live-shared.pem; cp shared2.key live-shared.key
cp grpc2.pem live-grpc.pem; cp grpc2.key live-grpc.key
printf 'not a certificate\n' >live-admin.pem
kill -HUP "$A"
for _ in $(seq 50); do grep -q "tls reload refused" a.log && grep -c "certificate and key reloaded" a.log | grep -q 2 && break; sleep 0.1; done
grep -q "tls reload refused, the certificate in force stays on the admin listener: --admin-tls-cert '.*live-admin.pem'" a.log &&
  pass "SIGHUP: the admin listener's bad file refused, naming the listener and the file" || bad "admin refused" "$(grep tls a.log)"
grep -q "tls: certificate and key reloaded on the http, resp, metrics listeners" a.log &&
  grep -q "tls: certificate and key reloaded on the grpc listener" a.log &&
  pass "SIGHUP: the shared and the gRPC certificates reloaded, each logged with its listeners" || bad "reload log" "$(grep tls a.log)"
is_presented "after SIGHUP, http" "$HP" ca-a shared2 -cert client-a.pem -key client-a.key
is_presented "after SIGHUP, resp" "$RP" ca-a shared2 -cert client-a.pem -key client-a.key
is_presented "after SIGHUP, grpc" "$GP" ca-a grpc2 -alpn h2
is_presented "after SIGHUP, admin keeps the old one" "$AP" ca-b admin -cert client-b.pem -key client-b.key
# Put right, the admin listener takes its new certificate at the next.
cp admin2.pem live-admin.pem; cp admin2.key live-admin.key
kill -HUP "$A"
for _ in $(seq 50); do grep -q "reloaded on the admin listener" a.log && break; sleep 0.1; done
is_presented "the admin file put right, next SIGHUP" "$AP" ca-b admin2 -cert client-b.pem -key client-b.key
kill -TERM "$A"
wait "$A" && pass "serve: SIGTERM, exit 0" || bad "exit" "$?"

# ---- the admin listener alone over TLS, the HTTP listener plain ----
"$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 --threads 1 \
  --admin-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --admin-tls-cert admin.pem --admin-tls-key admin.key \
  --admin-tls-client-ca ca-b.pem 2>b.log &
B=$!
pids+=("$B")
HP=$(port_of b.log "sluice:") && MP=$(port_of b.log "sluice: metrics") &&
  AP=$(port_of b.log "sluice: admin") || { echo "FAIL serve (admin TLS) did not start"; cat b.log; exit 1; }
out=$(curl -s -m 5 "http://127.0.0.1:$HP/healthz")
[ "$out" = '{"status":"ok"}' ] && pass "admin alone over TLS: the HTTP listener serves plain HTTP" || bad "plain http" "$out"
out=$(curl -s -m 5 --cacert ca-b.pem "${ADMIN_B[@]}" "https://127.0.0.1:$AP/admin/v1/limits")
[[ "$out" == *'"rules"'* || "$out" == *'"id"'* ]] && pass "admin alone over TLS: with client b's certificate" || bad "admin b" "$out"
curl -s -m 5 --cacert ca-b.pem "https://127.0.0.1:$AP/admin/v1/limits" >/dev/null
rc=$?
[ "$rc" -ne 0 ] && pass "admin alone over TLS: no client certificate refused (curl $rc)" || bad "admin b no cert" "curl exit 0"
out=$(curl -s -m 5 -i "http://127.0.0.1:$AP/admin/v1/limits")
[[ "$out" == *'"code":"ETLS"'* ]] && pass "admin alone over TLS: plain HTTP to it refused" || bad "admin plain" "$out"
m=$(curl -s -m 5 "http://127.0.0.1:$MP/metrics")
ok=$(handshakes "$m" admin ok)
[ "${ok:-0}" -ge 1 ] && ! grep -q 'sluice_tls_handshakes_total{listener="\(http\|metrics\)"' <<<"$m" &&
  pass "metrics: series for the admin listener alone (ok $ok)" || bad "admin-only series" "$(grep tls_ <<<"$m")"
kill -TERM "$B"
wait "$B" && pass "serve (admin TLS): SIGTERM, exit 0" || bad "exit" "$?"

# ---- sluice proxy: its admin listener's own certificate ----
UP=$(free_port)
python3 -m http.server "$UP" --bind 127.0.0.1 --directory "$tmp" >/dev/null 2>&1 &
pids+=("$!")
wait_port "$UP"
"$SLUICE" proxy --rules rules.yaml --listen 127.0.0.1:0 --threads 1 \
  --upstream "http://127.0.0.1:$UP" --admin-listen 127.0.0.1:0 \
  --admin-tls-cert admin.pem --admin-tls-key admin.key \
  --metrics-listen 127.0.0.1:0 --metrics-tls-cert grpc.pem --metrics-tls-key grpc.key 2>p.log &
PX=$!
pids+=("$PX")
PP=$(port_of p.log "sluice:") && AP=$(port_of p.log "sluice: admin") &&
  MP=$(port_of p.log "sluice: metrics") || { echo "FAIL proxy did not start"; cat p.log; exit 1; }
out=$(curl -s -m 5 "http://127.0.0.1:$PP/rules.yaml")
[[ "$out" == "domain: api"* ]] && pass "proxy: its client listener plain" || bad "proxy plain" "$out"
is_presented "proxy admin listener (--admin-tls-cert)" "$AP" ca-b admin
is_presented "proxy metrics listener (--metrics-tls-cert)" "$MP" ca-a grpc
m=$(curl -s -m 5 --cacert ca-a.pem "https://127.0.0.1:$MP/metrics")
[ "$(handshakes "$m" admin ok)" -ge 1 ] && [ "$(handshakes "$m" metrics ok)" -ge 2 ] &&
  ! grep -q 'listener="http"' <<<"$m" && pass "proxy metrics: the admin and metrics listeners' series" || bad "proxy series" "$(grep tls_ <<<"$m")"
kill -TERM "$PX"
wait "$PX" && pass "proxy: SIGTERM, exit 0" || bad "proxy exit" "$?"

# ---- half a pair: refused at start, exit 2, naming the flags ----
half() { # WHAT EXPECTED-MESSAGE ARGS...
  out=$(timeout 10 "$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --grpc-listen 127.0.0.1:0 "${@:3}" 2>&1 </dev/null)
  local st=$?
  [ "$st" = 2 ] && [[ "$out" == *"$2"* ]] && pass "$1: exit 2, '$2'" || bad "$1" "exit $st: $out"
}
half "a certificate without its key" "--admin-tls-cert needs --admin-tls-key" --admin-tls-cert admin.pem
half "a key without its certificate" "--grpc-tls-key needs --grpc-tls-cert" --grpc-tls-key grpc.key
half "a client CA without the pair" "--admin-tls-client-ca needs --admin-tls-cert" --admin-tls-client-ca ca-b.pem
printf 'rules: rules.yaml\nadmin_tls_key: admin.key\n' >half.yaml
half "from the config file" "--admin-tls-key needs --admin-tls-cert" --config half.yaml
out=$(timeout 10 "$SLUICE" serve --rules rules.yaml --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --admin-tls-cert missing.pem --admin-tls-key admin.key 2>&1 </dev/null)
st=$?
[ "$st" = 1 ] && [[ "$out" == *"--admin-tls-cert 'missing.pem'"* ]] &&
  pass "a listener's missing certificate at start: exit 1, naming its flag and file" || bad "missing admin cert" "exit $st: $out"

[ "$fail" = 0 ] && echo "all per-listener TLS checks passed"
exit "$fail"
