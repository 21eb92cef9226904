#!/bin/bash
# bench/upstream_tls.sh [SLUICE] - what HTTPS to the upstream costs
# `sluice proxy` (docs/benchmarks.md, "HTTPS to the proxy's upstream"),
# against the same proxy to a plain upstream in the same run:
#
# 1. Keep-alive upstream connections (each carries every request): the
#    proxy's CPU time per request from /proc (user + system), plain then
#    https, twice over (ROUNDS="1 2"; ROUNDS=" " skips it), so a drift of
#    the machine shows.
# 2. A new upstream connection per request (the upstream answers with
#    `Connection: close`, nginx's keepalive_requests 1): a TCP connect
#    against a TCP connect plus a TLS handshake, resumed from the
#    thread's last session (the proxy's counters say how many were, and
#    how many requests got 502 or 504).  2 s each, https first: every
#    connection leaves a TIME_WAIT for 60 s, and the loopback's 28,232
#    ephemeral ports would run out within a longer run.
#
# wrk -t1 -c20 for 5 s per figure (but 2.) on CPU 1, the proxy on one thread on
# CPU 0, the upstream one nginx worker (`return 200 "ok"`, plain and TLS
# on two ports) on CPU 1 too.  A CA and an EC P-256 certificate are made
# for the run.  Prints one line per figure and the ratios.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SLUICE="${1:-$ROOT/build-bench/sluice}"
PORT="${PORT:-18760}" # proxy; its metrics PORT+1; upstream plain PORT+2, TLS PORT+3
MPORT=$((PORT + 1)) UP=$((PORT + 2)) UPS=$((PORT + 3))
source "$HERE/lib.sh"
ports_free "$PORT" "$UPS"
W="$(mktemp -d)"
chmod 755 "$W"
UPID="" SP=""
cleanup() {
  [ -n "$SP" ] && kill -TERM "$SP" 2>/dev/null
  [ -n "$UPID" ] && kill -QUIT "$UPID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
cd "$W"

openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj /CN=bench-ca 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out server.key 2>/dev/null
openssl req -new -key server.key -out server.csr -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >san.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
  -out server.pem -days 2 -extfile san.ext 2>/dev/null

nginx_dir "$W/up"
{
  nginx_head
  cat <<Y
    ssl_certificate $W/server.pem;
    ssl_certificate_key $W/server.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    server { listen 127.0.0.1:$UP; listen 127.0.0.1:$UPS ssl;
      location / { return 200 "ok"; }
      location /once { keepalive_requests 1; return 200 "ok"; } } }
Y
} >"$W/up/nginx.conf"
taskset -c 1 nginx -p "$W/up/" -c "$W/up/nginx.conf" &
UPID=$!
wait_up "$UP"
wait_up "$UPS"

proxy_yaml proxy.yaml "$PORT" "$UP"
HZ=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
proxy() { # UPSTREAM-URL [FLAGS...]: the proxy, pid in SP
  taskset -c 0 "$SLUICE" proxy --config proxy.yaml --upstream "$@" \
    --metrics-listen "127.0.0.1:$MPORT" 2>>proxy.log &
  SP=$!
  wait_up "$PORT"
}
stop() {
  kill -TERM "$SP"
  wait "$SP" 2>/dev/null || true
  SP=""
}
load() { # PATH [SECONDS] -> "requests ticks" (the proxy's CPU ticks while wrk ran)
  local t0 n
  t0=$(cpu_ticks "$SP")
  n=$(taskset -c 1 wrk -t1 -c20 -d"${2:-5}s" "http://127.0.0.1:$PORT$1" |
    sed -n 's/ *\([0-9]*\) requests in.*/\1/p')
  echo "$n $(($(cpu_ticks "$SP") - t0))"
}
us() { python3 -c "print(round($2 / $HZ / $1 * 1e6, 2))"; } # N TICKS
report() { # NAME REQUESTS TICKS [SECONDS]
  echo "$1: $(($2 / ${4:-5})) requests/s, $(us "$2" "$3") us proxy CPU per request"
}
ratio() { python3 -c "print(round(($4 / $3) / ($2 / $1), 3))"; } # N1 T1 N2 T2

echo "# keep-alive upstream connections: the proxy's CPU per request"
for round in ${ROUNDS:-1 2}; do
  proxy "http://127.0.0.1:$UP"
  read -r pn pt < <(load /all)
  stop
  proxy "https://localhost:$UPS" --upstream-ca ca.pem
  read -r tn tt < <(load /all)
  stop
  report "plain $round" "$pn" "$pt"
  report "https $round" "$tn" "$tt"
  echo "https/plain $round: $(ratio "$pn" "$pt" "$tn" "$tt")x CPU per request"
done

echo "# a new upstream connection per request (Connection: close), 2 s each"
counts() { # what the proxy counted of its upstream: handshakes, 502s, 504s
  curl -s "http://127.0.0.1:$MPORT/metrics" |
    sed -n -e 's/^sluice_proxy_upstream_tls_handshakes_total{result="\(.*\)"} \(.*\)/\1 \2/p' \
      -e 's/^sluice_proxy_requests_total{route="_none_",outcome="\(bad_gateway\|gateway_timeout\)"} \(.*\)/\1 \2/p' |
    tr '\n' ' '
}
proxy "https://localhost:$UPS" --upstream-ca ca.pem
read -r tn tt < <(load /once 2)
tc=$(counts)
stop
proxy "http://127.0.0.1:$UP"
read -r pn pt < <(load /once 2)
pc=$(counts)
stop
report "plain, new TCP connections" "$pn" "$pt" 2
report "https, new TLS connections" "$tn" "$tt" 2
echo "counted with https: $tc"
echo "counted with plain: $pc"
echo "https/plain: $(ratio "$pn" "$pt" "$tn" "$tt")x CPU per request"
