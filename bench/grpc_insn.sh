#!/bin/bash
# bench/grpc_insn.sh [BINARY...] - user-space instructions per gRPC
# ShouldRateLimit of `sluice serve --threads 1 --grpc-listen` under
# callgrind (this VM has no hardware counters; callgrind repeats to a few
# parts per thousand): h2load -c4 -m100 sends 20,000 and then 60,000
# calls to a fresh server each time, and the figure is the difference of
# the two totals over 40,000, so start-up and shutdown cancel out.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- build-bench/sluice
R=$(mktemp -d)
trap 'rm -rf "$R"' EXIT
printf 'domain: bench\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n' >"$R/rules.yaml"
# The 5-byte-prefixed RateLimitRequest{domain "bench", descriptor
# api_key=k000001}, as bench/grpc_vs_json.sh makes it.
python3 - "$R/req.bin" <<'PY'
import sys
def ld(f, b): return bytes([f << 3 | 2, len(b)]) + b
entry = ld(1, b"api_key") + ld(2, b"k000001")
msg = ld(1, b"bench") + ld(2, ld(1, entry))
open(sys.argv[1], "wb").write(b"\0" + len(msg).to_bytes(4, "big") + msg)
PY
run() {
taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$R/cg.out" $1 serve --rules $R/rules.yaml --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:18901 --threads 1 2>/dev/null &
vp=$!
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/18901) 2>/dev/null && break; sleep 0.1; done
taskset -c 1 h2load -t1 -c4 -m100 -n $2 -d $R/req.bin -H 'content-type: application/grpc' -H 'te: trailers' http://127.0.0.1:18901/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit >/dev/null 2>&1
kill -TERM $vp; wait $vp 2>/dev/null
grep -m1 '^summary:\|^totals:' "$R/cg.out" | awk '{print $2}'
}
for bin in "$@"; do
  a=$(run "$bin" 20000)
  b=$(run "$bin" 60000)
  echo "$bin: $(((b - a) / 40000)) user-space instructions per call"
done
