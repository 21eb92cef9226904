#!/bin/bash
# The p99 of sluice serve's gRPC door (envoy's ShouldRateLimit over h2c)
# at half of its peak, measured by an open-loop paced load generator
# (bench/grpc_load.c) beside h2load --rps at the same rate.
#
#   RT=1 bench/grpc_p99.sh               # 3 rounds of 10 s runs
#   RT=1 ROUNDS=5 DUR=20 LC=8 bench/grpc_p99.sh
#
# Server: build-bench/sluice serve --threads 1 --grpc-listen, pinned to
#   CPU 0, the rules and request of bench/grpc_vs_json.sh (domain bench,
#   one descriptor api_key=k000001, a limit no run reaches).
# Each round, the load pinned to CPU 1:
#   peak     h2load -t1 -c4 -m100 -D$DUR (as bench/grpc_vs_json.sh): the
#            decisions/s (sluice_checks_total's increase over wall time)
#            and the server's CPU per decision (/proc/PID/stat)
#   paced    grpc_load -r PEAK*FRAC/100 -c$LC -d$DUR -w1: calls due
#            evenly spaced, dealt round LC connections, each timed from
#            the time it was due (no coordinated omission); its p50, p99,
#            p99.9, the achieved rate, and the server's CPU per decision
#   h2load   h2load -t1 -c$LC -m100 --rps=RATE/LC -D$DUR at the same
#            rate, p50 and p99 from its --log-file, for comparison
# RT=1 runs the server's thread and the load under SCHED_FIFO 1 (chrt;
# needs root), peak runs included, so that a neighbour on this shared
# machine cannot hold a core for a scheduler slice (without it the peak
# runs' server waited 4.5-6 s of 10 for its CPU).  Linux still gives
# other tasks 5% of each second (sched_rt_runtime_us): a server kept
# busier than that for a whole second stalls for up to 50 ms.
# Raw output: bench/results/grpc_p99_<UTC time>/ (not committed).
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}"
source "$PEERS_DIR/common.sh" # wait_port, stop_pid, cpu_ticks, wait_quiet, SRV_CPU/CLI_CPU
source "$HERE/lib.sh"         # ports_free, runq_wait_ns, rt_policy, grpc_bench_files

ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-10}" # seconds
FRAC="${FRAC:-50}" # percent of the round's peak
LC="${LC:-4}"     # connections of the paced runs
RT="${RT:-0}"
PORT="${PORT:-18340}"
GPORT=$((PORT + 1))
QUIET_MAX="${QUIET_MAX:-30}"; export QUIET_MAX
BUILD="${BUILD:-$ROOT/build-bench}"
SLUICE="$BUILD/sluice"
LOAD="$BUILD/bench/grpc_load"
OUT="$ROOT/bench/results/grpc_p99_$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
PATH_RLS=/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit

command -v h2load >/dev/null || { echo "h2load is missing (scripts/deps.sh --test)" >&2; exit 1; }
if [ ! -x "$SLUICE" ] || [ ! -x "$LOAD" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD" -j2 --target sluice grpc_load >>"$OUT/build.log" 2>&1 ||
    { echo "build failed (see $OUT/build.log)" >&2; exit 1; }
fi
ports_free "$PORT" "$GPORT"

grpc_bench_files "$OUT"

SPID=""
trap 'stop_pid "$SPID"' EXIT
trap 'exit 130' INT TERM
grpc_bench_serve
H2=(-d "$OUT/req.bin" -H 'content-type: application/grpc' -H 'te: trailers'
  "http://127.0.0.1:$GPORT$PATH_RLS")
RT_PRE=()
[ "$RT" = 1 ] && RT_PRE=(chrt -f 1)

# measure NAME CMD...: CMD pinned to the client CPU, output in NAME.txt,
# then "# result: decisions ticks wall_ns runq_wait_us".
measure() {
  local name=$1 f="$OUT/$1.txt" d0 d1 t0 t1 w0 w1 q0 q1
  shift
  { echo "# cmd: taskset -c $CLI_CPU $*"; wait_quiet; } >"$f"
  d0=$(decisions); t0=$(cpu_ticks "$SPID"); w0=$(date +%s%N); q0=$(runq_wait_ns "$SPID")
  timeout $((DUR * 3 + 30)) taskset -c "$CLI_CPU" "$@" >>"$f" 2>&1
  w1=$(date +%s%N); t1=$(cpu_ticks "$SPID"); d1=$(decisions); q1=$(runq_wait_ns "$SPID")
  echo "# result: $((d1 - d0)) $((t1 - t0)) $((w1 - w0)) $(( (q1 - q0) / 1000 ))" >>"$f"
}
result() { sed -n 's/^# result: //p' "$OUT/$1.txt"; }
cpu_us() { awk -v t="$1" -v d="$2" 'BEGIN {printf "%.2f", d ? t * 10000 / d : 0}'; }
pct() {
  awk '{print $3}' "$1" | sort -n | awk -v p="$2" '{a[NR] = $1}
    END {i = int(NR * p / 100 + 0.999999); if (i < 1) i = 1; printf "%.3f\n", a[i] / 1000}'
}

{
  echo "# grpc_p99: $(date -u +%FT%TZ), ROUNDS=$ROUNDS DUR=${DUR}s FRAC=$FRAC% LC=$LC RT=$RT"
  echo "# sluice: $SLUICE ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null))"
} | tee "$OUT/summary.txt"
[ "$RT" = 1 ] && rt_policy on "$SPID"
for r in $(seq "$ROUNDS"); do
  measure "peak_$r" "${RT_PRE[@]}" h2load -t1 -c4 -m100 -D"$DUR" "${H2[@]}"
  read -r n ticks wall _ < <(result "peak_$r")
  peak=$((n * 1000000000 / wall))
  rate=$((peak * FRAC / 100))
  measure "paced_$r" "${RT_PRE[@]}" "$LOAD" -v -r "$rate" -c "$LC" -d "$DUR" -w 1 \
    "127.0.0.1:$GPORT" "$PATH_RLS" "$OUT/req.bin"
  measure "h2load_$r" "${RT_PRE[@]}" h2load -t1 -c"$LC" -m100 --rps=$((rate / LC)) -D"$DUR" \
    --log-file="$OUT/h2load_$r.log" "${H2[@]}"
  read -r _ _ _ kq < <(result "peak_$r")
  read -r pn pticks _ pq < <(result "paced_$r")
  kv=$(grep '^rate=' "$OUT/paced_$r.txt")
  get() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" <<<"$kv"; }
  read -r _ _ _ hq < <(result "h2load_$r")
  echo "round $r: peak $peak decisions/s, $(cpu_us "$ticks" "$n") us CPU/decision (server waited ${kq} us);" \
    "paced at $rate/s (achieved $(get achieved)/s, $(cpu_us "$pticks" "$pn") us CPU/decision):" \
    "p50 $(get p50) ms, p99 $(get p99) ms, p99.9 $(get p999) ms, max $(get max) ms" \
    "(from send: p99 $(get sent_p99) ms; sent late p99 $(get late_p99) ms; server waited ${pq} us for its CPU);" \
    "h2load --rps same rate: p50 $(pct "$OUT/h2load_$r.log" 50) ms, p99 $(pct "$OUT/h2load_$r.log" 99) ms" \
    "(server waited ${hq} us)" | tee -a "$OUT/summary.txt"
done
python3 - "$OUT/summary.txt" <<'P' | tee -a "$OUT/summary.txt"
import re, statistics, sys
keys = ["peak", "cpu_peak", "rate", "achieved", "cpu_paced", "p50", "p99", "p999", "max", "h2_p50", "h2_p99"]
rows = []
for line in open(sys.argv[1]):
    m = re.match(r"round \d+: peak (\d+) decisions/s, ([\d.]+) us CPU/decision.*?; paced at (\d+)/s "
                 r"\(achieved ([\d.]+)/s, ([\d.]+) us CPU/decision\): p50 ([\d.]+) ms, p99 ([\d.]+) ms, "
                 r"p99.9 ([\d.]+) ms, max ([\d.]+) ms.*h2load --rps same rate: p50 ([\d.]+) ms, p99 ([\d.]+) ms", line)
    if m:
        rows.append(dict(zip(keys, map(float, m.groups()))))
if rows:
    med = {k: statistics.median(r[k] for r in rows) for k in keys}
    print("median: peak %(peak).0f/s at %(cpu_peak).2f us CPU/decision; paced at %(rate).0f/s: "
          "p50 %(p50).3f ms, p99 %(p99).3f ms, p99.9 %(p999).3f ms (%(cpu_paced).2f us CPU/decision); "
          "h2load --rps: p50 %(h2_p50).3f ms, p99 %(h2_p99).3f ms" % med)
P
echo "raw output: $OUT"
