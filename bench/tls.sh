#!/bin/bash
# bench/tls.sh [SLUICE] - what TLS costs `sluice serve` (docs/benchmarks.md,
# "TLS"), every figure against a peer measured in the same run:
#
# 1. POST /v1/check with keep-alive, plain and over TLS (wrk -t1 -c20,
#    5 s each, the daemon on one thread on CPU 0, wrk on CPU 1):
#    decisions/s, and the daemon's CPU time per decision from /proc
#    (user + system), which repeats where rates swing; then the same for
#    gRPC's ShouldRateLimit (h2load -t1 -c4 -m100), h2c against h2 over
#    TLS.
# 2. TLS handshakes: full ones (TLS 1.3) and resumed ones (TLS 1.2 from
#    the session cache: s_time -reuse does not resume 1.3's tickets),
#    openssl s_time on CPU 1 for 5 s each, against sluice and against
#    nginx (one worker on CPU 0, master_process off) serving the same
#    certificate; the server's CPU per handshake from /proc, since the
#    one s_time client is what limits the rate.
#
# A CA and an EC P-256 certificate are made for the run.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SLUICE="${1:-$ROOT/build-bench/sluice}"
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
cd "$W"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj /CN=bench-ca 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out server.key 2>/dev/null
openssl req -new -key server.key -out server.csr -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >san.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
  -out server.pem -days 2 -extfile san.ext 2>/dev/null
PORT=18751
TPORT=18752
NPORT=18753
NPLAIN=18755

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
serve() { # ARGS... -> pid in SP
  taskset -c 0 "$SLUICE" serve --rules "$ROOT/bench/serve_rules.yaml" --threads 1 "$@" 2>>serve.log &
  SP=$!
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.05; done
}
load() { # URL [PID] -> "requests ticks" (the server's CPU ticks while wrk ran)
  local t0 n pid=${2:-$SP}
  t0=$(cpu_ticks "$pid")
  n=$(taskset -c 1 wrk -t1 -c20 -d5s -s "$ROOT/bench/wrk_check.lua" "$1" |
    sed -n 's/ *\([0-9]*\) requests in.*/\1/p')
  echo "$n $(($(cpu_ticks "$pid") - t0))"
}
HZ=$(getconf CLK_TCK)
report() { # NAME REQUESTS TICKS
  echo "$1: $(($2 / 5)) decisions/s, $(python3 -c "print(round($3 / $HZ / $2 * 1e6, 2))") us CPU per decision"
}

echo "# POST /v1/check, keep-alive, one thread"
serve --listen 127.0.0.1:$PORT
read -r pn pt < <(load "http://127.0.0.1:$PORT/v1/check")
kill "$SP"; wait "$SP" 2>/dev/null || true
serve --listen 127.0.0.1:$PORT --tls-cert server.pem --tls-key server.key
read -r tn tt < <(load "https://127.0.0.1:$PORT/v1/check")
report plain "$pn" "$pt"
report tls "$tn" "$tt"
echo "tls/plain: $(python3 -c "print(round($tn / $pn, 3))")x decisions/s, $(python3 -c "print(round(($tt / $tn) / ($pt / $pn), 3))")x CPU per decision"

echo "# TLS handshakes (openssl s_time, 5 s each): the server's CPU per handshake (new: TLS 1.3; resumed: TLS 1.2)"
handshakes() { # PORT MODE PID -> "connections ticks"
  local t0 n
  t0=$(cpu_ticks "$3")
  # shellcheck disable=SC2086 # MODE is words
  n=$(taskset -c 1 openssl s_time -connect "127.0.0.1:$1" -CAfile ca.pem $2 -time 5 2>/dev/null |
    sed -n 's/^\([0-9]*\) connections in [0-9]* real seconds.*/\1/p' | head -1)
  echo "$n $(($(cpu_ticks "$3") - t0))"
}
per() { python3 -c "print(round($2 / $HZ / $1 * 1e6, 1))"; } # N TICKS -> us
read -r sn snt < <(handshakes $PORT -new "$SP")
read -r sr srt < <(handshakes $PORT "-reuse -tls1_2" "$SP")
kill "$SP"; wait "$SP" 2>/dev/null || true
cat >nginx.conf <<EOF
daemon off;
master_process off;
worker_processes 1;
error_log $W/nginx.err;
pid $W/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  ssl_session_cache shared:S:10m;
  ssl_session_tickets on;
  server {
    listen 127.0.0.1:$NPLAIN;
    location / { return 200 "ok\n"; }
  }
  server {
    listen 127.0.0.1:$NPORT ssl;
    ssl_certificate $W/server.pem;
    ssl_certificate_key $W/server.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    location / { return 200 "ok\n"; }
  }
}
EOF
taskset -c 0 nginx -c "$W/nginx.conf" -p "$W" &
NP=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$NPORT) 2>/dev/null && break; sleep 0.05; done
read -r nn nnt < <(handshakes $NPORT -new "$NP")
read -r nr nrt < <(handshakes $NPORT "-reuse -tls1_2" "$NP")
# The peer's price of TLS per request: nginx answering the same POSTs
# with `return 200`, plain and over TLS, keep-alive, as above.
read -r npn npt < <(load "http://127.0.0.1:$NPLAIN/" "$NP")
read -r ntn ntt < <(load "https://127.0.0.1:$NPORT/" "$NP")
kill "$NP"; wait "$NP" 2>/dev/null || true
echo "sluice: $sn new handshakes, $(per "$sn" "$snt") us CPU each; $sr resumed, $(per "$sr" "$srt") us each"
echo "nginx:  $nn new handshakes, $(per "$nn" "$nnt") us CPU each; $nr resumed, $(per "$nr" "$nrt") us each"
echo "nginx/sluice CPU per handshake (above 1: sluice spends less): $(python3 -c "print(round(($nnt / $nn) / ($snt / $sn), 3))")x new, $(python3 -c "print(round(($nrt / $nr) / ($srt / $sr), 3))")x resumed"
echo "# what TLS adds per keep-alive request: sluice's POST /v1/check (above) against nginx's return 200"
report "nginx plain" "$npn" "$npt"
report "nginx tls" "$ntn" "$ntt"
python3 -c "
s = ($tt / $tn - $pt / $pn) / $HZ * 1e6
n = ($ntt / $ntn - $npt / $npn) / $HZ * 1e6
print('TLS adds %.2f us CPU per request to sluice, %.2f us to nginx: %.3fx nginx' % (s, n, s / n))"

echo "# gRPC ShouldRateLimit, h2load -t1 -c4 -m100 for 5 s: h2c, then h2 over TLS (ALPN)"
source "$ROOT/bench/lib.sh" # grpc_bench_files
grpc_bench_files "$W"
GPORT=18754
grpc() { # URL -> "requests ticks"
  local t0 n
  t0=$(cpu_ticks "$SP")
  n=$(taskset -c 1 h2load -t1 -c4 -m100 -D5 -d "$W/req.bin" \
    -H 'content-type: application/grpc' -H 'te: trailers' \
    "$1/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" 2>/dev/null |
    sed -n 's/^requests: [0-9]* total, [0-9]* started, \([0-9]*\) done.*/\1/p')
  echo "$n $(($(cpu_ticks "$SP") - t0))"
}
gserve() { # ARGS...
  taskset -c 0 "$SLUICE" serve --rules "$W/rules.yaml" --threads 1 --listen 127.0.0.1:$PORT \
    --grpc-listen 127.0.0.1:$GPORT "$@" 2>>serve.log &
  SP=$!
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$GPORT) 2>/dev/null && break; sleep 0.05; done
}
gserve
read -r gpn gpt < <(grpc "http://127.0.0.1:$GPORT")
kill "$SP"; wait "$SP" 2>/dev/null || true
gserve --tls-cert server.pem --tls-key server.key
read -r gtn gtt < <(grpc "https://127.0.0.1:$GPORT")
kill "$SP"; wait "$SP" 2>/dev/null || true
report "grpc h2c" "$gpn" "$gpt"
report "grpc tls" "$gtn" "$gtt"
echo "grpc tls/plain: $(python3 -c "print(round($gtn / $gpn, 3))")x decisions/s, $(python3 -c "print(round(($gtt / $gtn) / ($gpt / $gpn), 3))")x CPU per decision"
