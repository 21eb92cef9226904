#!/bin/bash
# bench/grpc_cpu.sh BINARY... - sluice serve's CPU per gRPC decision at
# peak, binaries alternating round by round (ROUNDS, default 3), each
# round on a fresh `BINARY serve --threads 1 --grpc-listen` pinned to
# CPU 0 under SCHED_FIFO 1 with all its threads, driven for DUR seconds
# (default 10) by `h2load -t1 -c4 -m100` pinned to CPU 1 under
# SCHED_FIFO 1 (chrt; needs root), the request of bench/grpc_vs_json.sh.
# Prints decisions/s (sluice_checks_total's increase over wall time) and
# the server's user and system CPU per decision (/proc/PID/stat).
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PEERS_DIR="${PEERS_DIR:-$HERE/../../shared/peers}"
source "$PEERS_DIR/common.sh" # wait_port, stop_pid, SRV_CPU/CLI_CPU
source "$HERE/lib.sh"         # ports_free, grpc_bench_files
[ $# -gt 0 ] || set -- "$HERE/../build-bench/sluice"
ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-10}"
PORT="${PORT:-18350}"
GPORT=$((PORT + 1))
ports_free "$PORT" "$GPORT"
R=$(mktemp -d)
SPID=""
trap 'stop_pid "$SPID"; rm -rf "$R"' EXIT
grpc_bench_files "$R"
decisions() {
  curl -s "http://127.0.0.1:$PORT/metrics" |
    awk '/^sluice_checks_total\{/ {n += $2} END {printf "%d\n", n}'
}
for r in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    taskset -c "$SRV_CPU" "$bin" serve --rules "$R/rules.yaml" --threads 1 --public-metrics true \
      --listen "127.0.0.1:$PORT" --grpc-listen "127.0.0.1:$GPORT" 2>/dev/null &
    SPID=$!
    wait_port "$PORT" && wait_port "$GPORT" || exit 1
    chrt -f -a -p 1 "$SPID"
    d0=$(decisions); read -r u0 s0 < <(cut -d')' -f2 "/proc/$SPID/stat" | awk '{print $12, $13}')
    w0=$(date +%s%N)
    chrt -f 1 taskset -c "$CLI_CPU" h2load -t1 -c4 -m100 -D"$DUR" -d "$R/req.bin" \
      -H 'content-type: application/grpc' -H 'te: trailers' \
      "http://127.0.0.1:$GPORT/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" >/dev/null 2>&1
    w1=$(date +%s%N)
    read -r u1 s1 < <(cut -d')' -f2 "/proc/$SPID/stat" | awk '{print $12, $13}')
    d1=$(decisions)
    stop_pid "$SPID"
    SPID=""
    awk -v b="$bin" -v r="$r" -v n=$((d1 - d0)) -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v w=$((w1 - w0)) \
      'BEGIN {printf "round %d %s: %d decisions/s, %.2f us CPU/decision (user %.2f, system %.2f)\n",
              r, b, n * 1e9 / w, (u + s) * 10000 / n, u * 10000 / n, s * 10000 / n}'
  done
done
