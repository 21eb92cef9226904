#!/bin/bash
# sluice serve's gRPC door (envoy's ShouldRateLimit over h2c) vs its
# POST /json (lyft's JSON API, the same request), on one server and its
# one event-loop thread, measured in the same run.
#
#   bench/grpc_vs_json.sh                 # 3 alternating rounds, 10 s runs
#   ROUNDS=5 DUR=20 bench/grpc_vs_json.sh
#
# Server: build-bench/sluice serve --threads 1 --listen 127.0.0.1:$PORT
#   --grpc-listen 127.0.0.1:$((PORT+1)), pinned to CPU 0, rules of one
#   descriptor api_key with a limit no run reaches (every request is
#   decided and allowed: a decision, not a refusal, is what is timed).
# Request: domain "bench", one descriptor api_key=k000001, the same
#   for both APIs: a RateLimitRequest framed for gRPC (5-byte prefix) in
#   a file for h2load -d; its proto3 JSON for wrk.
# Load, pinned to CPU 1, one client thread:
#   gRPC peak   h2load -t1 -c$GC -m$GM -D$DUR -d req.bin
#               -H 'content-type: application/grpc' -H 'te: trailers'
#               (GC connections of GM concurrent streams: envoy keeps a few
#               HTTP/2 connections with many streams each)
#   /json peak  wrk -t1 -c$JC -d$DUR, POST of the JSON body (keep-alive)
#   ~50%        each API at half its own peak of that round, paced by
#               h2load --rps (per connection; gRPC -c$HC -m$HM, by default
#               as at peak; /json with --h1 -c$JC, one request at a time
#               per connection), every request's time in its --log-file:
#               p50, p99 from those.  h2load times a request from its own
#               submission to its own reading of the answer, on one
#               thread: with hundreds of streams in flight its handling of
#               a burst of answers is in the figures too
# Decisions: sluice_checks_total's increase over the run (so an answer
# that was not a decision is not counted); per second over the run's
# wall time.  Server CPU per decision: utime+stime ticks of the server
# from /proc/PID/stat over the run / decisions.  Instructions per
# decision with `perf stat -e instructions -p PID` when the machine has
# hardware counters (this VM has none: the line says so).  Run-queue
# wait: how long the server's thread was runnable but waited for its CPU
# over each run (schedstat): on this shared machine a latency run whose
# server waited milliseconds measured the neighbours.
# RT=1: the ~50% runs run the server's thread and h2load under
# SCHED_FIFO priority 1 (chrt; needs root), so that other processes
# cannot hold either core for a scheduler slice while a request waits.
# Raw output: bench/results/grpc_vs_json_<UTC time>/ (not committed).
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}"
source "$PEERS_DIR/common.sh" # wait_port, stop_pid, cpu_ticks, wait_quiet, SRV_CPU/CLI_CPU
source "$HERE/lib.sh"         # ports_free, runq_wait_ns, rt_policy

ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-10}" # seconds
GC="${GC:-4}"
GM="${GM:-100}"
HC="${HC:-$GC}" # the ~50% runs' connections and streams each
HM="${HM:-$GM}"
JC="${JC:-50}"
RT="${RT:-0}"
PORT="${PORT:-18300}"
GPORT=$((PORT + 1))
QUIET_MAX="${QUIET_MAX:-30}"; export QUIET_MAX
BUILD="${BUILD:-$ROOT/build-bench}"
SLUICE="$BUILD/sluice"
OUT="$ROOT/bench/results/grpc_vs_json_$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
PATH_RLS=/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit

for t in h2load wrk python3; do
  command -v "$t" >/dev/null || { echo "$t is missing (scripts/deps.sh --test installs it)" >&2; exit 1; }
done
if [ ! -x "$SLUICE" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD" -j2 --target sluice >>"$OUT/build.log" 2>&1 ||
    { echo "build failed (see $OUT/build.log)" >&2; exit 1; }
fi
ports_free "$PORT" "$GPORT"

# --- the rules and the two requests ---------------------------------------------
cat >"$OUT/rules.yaml" <<'Y'
domain: bench
descriptors:
  - key: api_key
    rate_limit: {unit: second, requests_per_unit: 1000000000}
Y
python3 - "$OUT" <<'P'
import sys
out = sys.argv[1]
def varint(n):
    b = b""
    while n >= 0x80:
        b += bytes([n & 0x7F | 0x80]); n >>= 7
    return b + bytes([n])
def ld(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload
entry = ld(1, b"api_key") + ld(2, b"k000001")
msg = ld(1, b"bench") + ld(2, ld(1, entry))
open(out + "/req.bin", "wb").write(b"\0" + len(msg).to_bytes(4, "big") + msg)
open(out + "/req.json", "w").write(
    '{"domain":"bench","descriptors":[{"entries":[{"key":"api_key","value":"k000001"}]}]}')
P
cat >"$OUT/json.lua" <<Y
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[$(cat "$OUT/req.json")]]
Y

# --- the server -------------------------------------------------------------------
SPID=""
trap 'stop_pid "$SPID"' EXIT
trap 'exit 130' INT TERM
grpc_bench_serve
# One call of each, checked: gRPC status 0 and overall OK; /json 200.
h2load -n1 -c1 -d "$OUT/req.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
  "http://127.0.0.1:$GPORT$PATH_RLS" >"$OUT/check_grpc.txt" 2>&1
grep -q '1 succeeded' "$OUT/check_grpc.txt" ||
  { echo "the gRPC check failed (see $OUT/check_grpc.txt)" >&2; exit 1; }
curl -fsS -d @"$OUT/req.json" "http://127.0.0.1:$PORT/json" | grep -q '"overallCode":"OK"' ||
  { echo "the /json check failed" >&2; exit 1; }
if perf stat -e instructions true 2>&1 | grep -q 'not supported'; then
  PERF=0; HWC="perf stat -e instructions: <not supported> (no hardware counters on this VM)"
else
  PERF=1; HWC="perf stat -e instructions -p PID over each peak run"
fi

# --- one run ------------------------------------------------------------------------
# measure NAME CMD...: runs CMD pinned to the client CPU; writes NAME.txt
# with the command's output and, last, "decisions ticks wall_ns insn".
measure() {
  local name=$1 f="$OUT/$1.txt" d0 d1 t0 t1 w0 w1 q0 q1 pp=""
  shift
  { echo "# cmd: taskset -c $CLI_CPU $*"; wait_quiet; } >"$f"
  d0=$(decisions); t0=$(cpu_ticks "$SPID"); w0=$(date +%s%N); q0=$(runq_wait_ns "$SPID")
  if [ "$PERF" = 1 ]; then
    perf stat -e instructions -x, -o "$OUT/$name.perf" -p "$SPID" &
    pp=$!
  fi
  timeout $((DUR * 3 + 30)) taskset -c "$CLI_CPU" "$@" >>"$f" 2>&1
  [ -n "$pp" ] && kill -INT "$pp" && wait "$pp"
  w1=$(date +%s%N); t1=$(cpu_ticks "$SPID"); d1=$(decisions); q1=$(runq_wait_ns "$SPID")
  local insn=0
  [ -n "$pp" ] && insn=$(awk -F, '/instructions/ {print $1}' "$OUT/$name.perf")
  echo "# result: $((d1 - d0)) $((t1 - t0)) $((w1 - w0)) ${insn:-0} $(( (q1 - q0) / 1000 ))" >>"$f"
}
result() { sed -n 's/^# result: //p' "$OUT/$1.txt"; }
# pct LOGFILE P: the P-th percentile of h2load's per-request times, in ms
pct() {
  awk '{print $3}' "$1" | sort -n | awk -v p="$2" '{a[NR] = $1}
    END {i = int(NR * p / 100 + 0.999999); if (i < 1) i = 1; printf "%.3f\n", a[i] / 1000}'
}

grpc_peak() {
  measure "$1" h2load -t1 -c"$GC" -m"$GM" -D"$DUR" -d "$OUT/req.bin" \
    -H 'content-type: application/grpc' -H 'te: trailers' "http://127.0.0.1:$GPORT$PATH_RLS"
}
json_peak() {
  measure "$1" wrk -t1 -c"$JC" -d"${DUR}s" -s "$OUT/json.lua" "http://127.0.0.1:$PORT/json"
}
# grpc_half NAME PEAK, json_half NAME PEAK
RT_PRE=()
[ "$RT" = 1 ] && RT_PRE=(chrt -f 1)
grpc_half() {
  local rps=$(( $2 / 2 / HC ))
  measure "$1" "${RT_PRE[@]}" h2load -t1 -c"$HC" -m"$HM" --rps="$rps" -D"$DUR" --log-file="$OUT/$1.log" \
    -d "$OUT/req.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
    "http://127.0.0.1:$GPORT$PATH_RLS"
}
json_half() {
  local rps=$(( $2 / 2 / JC ))
  measure "$1" "${RT_PRE[@]}" h2load --h1 -t1 -c"$JC" -m1 --rps="$rps" -D"$DUR" --log-file="$OUT/$1.log" \
    -d "$OUT/req.json" -H 'content-type: application/json' "http://127.0.0.1:$PORT/json"
}

per_s() { echo $(( $1 * 1000000000 / $2 )); }                  # decisions wall_ns
cpu_us() { awk -v t="$1" -v d="$2" 'BEGIN {printf "%.2f", t * 10000 / d}'; } # ticks decisions

# --- rounds -----------------------------------------------------------------------------
{
  echo "# grpc_vs_json: $(date -u +%FT%TZ), ROUNDS=$ROUNDS DUR=${DUR}s, gRPC -c$GC -m$GM (~50%: -c$HC -m$HM), /json -c$JC, RT=$RT"
  echo "# sluice: $SLUICE ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null))"
  echo "# $HWC"
} | tee "$OUT/summary.txt"
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="grpc json"; else order="json grpc"; fi
  for api in $order; do
    "${api}_peak" "${api}_peak_$r"
    read -r n ticks wall insn < <(result "${api}_peak_$r")
    peak=$(per_s "$n" "$wall")
    [ "$RT" = 1 ] && rt_policy on "$SPID"
    "${api}_half" "${api}_half_$r" "$peak"
    [ "$RT" = 1 ] && rt_policy off "$SPID"
    read -r hn _ hwall _ hq < <(result "${api}_half_$r")
    line="round $r $api: peak $peak decisions/s, $(cpu_us "$ticks" "$n") us CPU/decision"
    [ "$PERF" = 1 ] && [ "$n" -gt 0 ] && line+=", $((insn / n)) instructions/decision"
    line+="; at $(per_s "$hn" "$hwall")/s (half): p50 $(pct "$OUT/${api}_half_$r.log" 50) ms, p99 $(pct "$OUT/${api}_half_$r.log" 99) ms (server waited ${hq} us for its CPU)"
    echo "$line" | tee -a "$OUT/summary.txt"
  done
done

# Medians over the rounds, and the ratio round by round.
python3 - "$OUT/summary.txt" <<'P' | tee -a "$OUT/summary.txt"
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"round (\d+) (\w+): peak (\d+) decisions/s, ([\d.]+) us CPU/decision.*"
                 r"p50 ([\d.]+) ms, p99 ([\d.]+) ms", line)
    if m:
        rows.setdefault(m.group(2), {})[int(m.group(1))] = [float(x) for x in m.groups()[2:]]
med = lambda api, i: statistics.median(v[i] for v in rows[api].values())
for api in ("grpc", "json"):
    print("median %s: %.0f decisions/s, %.2f us CPU/decision, p50 %.3f ms, p99 %.3f ms at half of peak"
          % (api, med(api, 0), med(api, 1), med(api, 2), med(api, 3)))
ratios = [rows["grpc"][r][0] / rows["json"][r][0] for r in rows["grpc"] if r in rows["json"]]
print("gRPC/json decisions/s, median of the rounds' ratios: %.2f" % statistics.median(ratios))
P
echo "raw output: $OUT"
