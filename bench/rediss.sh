#!/bin/bash
# bench/rediss.sh [SLUICE] - what TLS to Redis costs (docs/benchmarks.md,
# "TLS to Redis"): `sluice serve --store rediss://` against
# `--store redis://` in the same run, on one redis-server that listens on
# both (a plain port and a TLS port asking for client certificates).
#
#   ROUNDS=3 DUR=8 bench/rediss.sh build-bench/sluice
#
# redis-server on CPU 0; sluice serve (--threads 1) and wrk (-t1 -c50,
# POST /v1/check of one of 100k keys, bench/wrk_check.lua, the rule of
# bench/serve_redis_rules.yaml) share CPU 1.  Rounds alternate plain and
# TLS.  Per round: decisions/s, Redis's CPU per decision and the
# daemon's CPU per decision, both from /proc (user + system), which
# repeat where the rates swing; then the medians and TLS/plain ratios.
# A CA, a server and a client certificate are made for the run.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SLUICE="${1:-$ROOT/build-bench/sluice}"
ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-8}"
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
cd "$W"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj /CN=bench-ca 2>/dev/null
for who in server client; do
  key $who.key
  openssl req -new -key $who.key -out $who.csr -subj /CN=$who 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >$who.ext
  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
    -out $who.pem -days 2 -extfile $who.ext 2>/dev/null
done
RPORT=18761
RTLS=18762
PORT=18763
taskset -c 0 redis-server --port $RPORT --tls-port $RTLS --bind 127.0.0.1 \
  --save "" --appendonly no --tls-cert-file server.pem --tls-key-file server.key \
  --tls-ca-cert-file ca.pem --tls-auth-clients yes >redis.log 2>&1 &
RP=$!
for _ in $(seq 100); do redis-cli -p $RPORT ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
round() { # STORE ARGS... -> "requests redis_ticks sluice_ticks"
  redis-cli -p $RPORT FLUSHALL >/dev/null
  taskset -c 1 "$SLUICE" serve --rules "$ROOT/bench/serve_redis_rules.yaml" \
    --listen 127.0.0.1:$PORT --threads 1 --redis-timeout 1s --store "$@" 2>>serve.log &
  local sp=$! r0 s0 n
  for _ in $(seq 100); do
    curl -s "http://127.0.0.1:$PORT/readyz" | grep -q '"store_status":"up"' && break
    sleep 0.1
  done
  r0=$(cpu_ticks $RP)
  s0=$(cpu_ticks $sp)
  n=$(taskset -c 1 wrk -t1 -c50 -d"${DUR}s" -s "$ROOT/bench/wrk_check.lua" \
    "http://127.0.0.1:$PORT/v1/check" | sed -n 's/ *\([0-9]*\) requests in.*/\1/p')
  echo "$n $(($(cpu_ticks $RP) - r0)) $(($(cpu_ticks $sp) - s0))"
  kill $sp
  wait $sp 2>/dev/null || true
}
: >rounds
for i in $(seq "$ROUNDS"); do
  read -r n rt st < <(round "redis://127.0.0.1:$RPORT")
  echo "plain $n $rt $st" | tee -a rounds
  read -r n rt st < <(round "rediss://127.0.0.1:$RTLS" --redis-tls-ca ca.pem \
    --redis-tls-cert client.pem --redis-tls-key client.key)
  echo "tls $n $rt $st" | tee -a rounds
done
python3 - "$DUR" "$HZ" rounds <<'PY'
import statistics, sys
dur, hz = float(sys.argv[1]), float(sys.argv[2])
rows = {"plain": [], "tls": []}
for line in open(sys.argv[3]):
    name, n, rt, st = line.split()
    n, rt, st = int(n), int(rt), int(st)
    rows[name].append((n / dur, rt / hz / n * 1e6, st / hz / n * 1e6))
med = {k: [statistics.median(c) for c in zip(*v)] for k, v in rows.items()}
for k in ("plain", "tls"):
    for r in rows[k]:
        print("%-5s %8.0f decisions/s  redis %.2f us CPU/decision  sluice %.2f us CPU/decision" % (k, *r))
for k in ("plain", "tls"):
    print("median %-5s %8.0f decisions/s  redis %.2f us  sluice %.2f us" % (k, *med[k]))
p, t = med["plain"], med["tls"]
print("tls/plain: %.3fx decisions/s, %.3fx Redis CPU per decision, %.3fx sluice CPU per decision"
      % (t[0] / p[0], t[1] / p[1], t[2] / p[2]))
PY
