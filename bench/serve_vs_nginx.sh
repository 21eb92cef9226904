#!/bin/bash
# sluice serve vs the peer nginx limit_req, measured in the same run.
#
#   bench/serve_vs_nginx.sh            # 3 alternating rounds, 10 s runs
#   ROUNDS=5 DUR=20s bench/serve_vs_nginx.sh
#
# Servers (both pinned to CPU 0, one worker / one event-loop thread each):
#   sluice: build-bench/sluice serve --rules bench/serve_rules.yaml
#           --listen 127.0.0.1:$PORT --threads 1   (100k keys, all allowed)
#   nginx:  the peer setup $PEERS_DIR/nginx/start.sh (nginx.conf:
#           worker_processes 1, worker_cpu_affinity 01); port 18088 serves a
#           2-byte static file through `limit_req zone=key_st` keyed by
#           X-Api-Key (1000 r/s per key, burst 1000 nodelay: all pass).
# Load: wrk pinned to CPU 1, -t1 -c$CONNS keep-alive, random key out of 100k
# per request (sluice: bench/wrk_check.lua POST /v1/check; nginx: the peer's
# $PEERS_DIR/wrk/keys.lua).
#
# Per round, for each server (the order alternates from round to round):
#   peak   wrk -t1 -c50 -dDUR --latency        -> requests/s, p50, p99
#   ~50%   the same connections paced by wrk's delay() (bench/wrk_check.lua,
#          DELAY_MS) to about half of that round's own peak: two CAL-long
#          calibration runs pick the delay (see paced_run), then a DUR-long
#          run gives p50/p99 and the rate actually achieved (printed as
#          "% of peak"; the latency is for that rate).
# Server CPU per request = CPU ticks (utime+stime from /proc/PID/stat, of
# the sluice process / the nginx master+worker) over the run / requests.
# Ratios sluice/nginx are taken round by round; the table shows medians.
#
# Run-queue wait: the time the server's threads were runnable but waited
# for their CPU (field 2 of /proc/PID/task/TID/schedstat), summed over the
# run.  On a shared machine other processes land on the server's core; a
# latency run whose server waited milliseconds measured the neighbours,
# not the server, so every run reports it and the summary sets it beside
# each p99.
#
# RT=1: the latency runs (calibration and ~50%) run the server's threads
# and wrk under SCHED_FIFO priority 1 (chrt), so that other processes on
# the shared machine cannot hold either core for a scheduler slice (~4 ms)
# while a request waits; both servers get the same treatment, and the
# peak runs, which keep both cores busy, stay under the normal policy.
# Needs root.
#
# Instructions per request (INSN=1, the default, when valgrind is there):
# this VM has no hardware counters, so each server runs once more under
# valgrind's callgrind, alone, before the timed runs: the user-space
# instructions of its process over an INSN_DUR wrk run at whatever rate
# it manages under valgrind, minus those of a run without requests, over
# the requests.  Exact and repeatable, but user space only: the kernel's
# share (TCP over loopback, about half of either server's time) is not in
# it.  nginx runs for this from the peer's nginx.conf under a private
# prefix in the results directory.
#
# Raw wrk output: bench/results/serve_vs_nginx_<UTC time>/ (not committed).
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}" # the peers, beside the repository
source "$PEERS_DIR/common.sh"          # wait_port, stop_pid, cpu_ticks, wait_quiet, SRV_CPU/CLI_CPU
source "$HERE/lib.sh"                  # runq_wait_ns, rt_policy

ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-10s}"
CAL="${CAL:-2s}"
CONNS="${CONNS:-50}"
INSN="${INSN:-1}"
RT="${RT:-0}"
INSN_DUR="${INSN_DUR:-10}"
PORT="${PORT:-18200}"
QUIET_MAX="${QUIET_MAX:-30}"; export QUIET_MAX
REV="${REV:-}"                          # e.g. REV=HEAD: build that commit (git archive), not the working tree
BUILD="${BUILD:-$ROOT/build-bench}"
SLUICE="$BUILD/sluice"
RULES="$HERE/serve_rules.yaml"
LUA="$HERE/wrk_check.lua"
KEYS_LUA="$PEERS_DIR/wrk/keys.lua"
NGINX_URL="http://127.0.0.1:18088/ok.txt"
SLUICE_URL="http://127.0.0.1:$PORT/v1/check"
OUT="$ROOT/bench/results/serve_vs_nginx_$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"

# --- tools -----------------------------------------------------------------
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y "${need[@]}" >"$OUT/apt.log" 2>&1 ||
    { $SUDO apt-get update >>"$OUT/apt.log" 2>&1 && $SUDO apt-get install -y "${need[@]}" >>"$OUT/apt.log" 2>&1; } ||
    { echo "could not install ${need[*]} (see $OUT/apt.log)" >&2; exit 1; }
fi
export PATH="$PATH:/usr/sbin"
SRCDIR="$ROOT"
if [ -n "$REV" ]; then
  SRCDIR="$OUT/src"; BUILD="$OUT/build"; SLUICE="$BUILD/sluice"
  mkdir -p "$SRCDIR" && git -C "$ROOT" archive "$REV" | tar -x -C "$SRCDIR" ||
    { echo "git archive $REV failed" >&2; exit 1; }
fi
if [ ! -x "$SLUICE" ]; then
  cmake -S "$SRCDIR" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD" -j2 --target sluice >>"$OUT/build.log" 2>&1 ||
    { echo "build failed (see $OUT/build.log)" >&2; exit 1; }
fi
if perf stat -e instructions true 2>&1 | grep -q 'not supported'; then
  HWC="hardware counters: not supported on this machine (perf stat -e instructions: <not supported>)"
else
  HWC="hardware counters: available (not used here; see $PEERS_DIR/insn.sh)"
fi
[ "$INSN" = 1 ] && ! command -v valgrind >/dev/null && { echo "no valgrind: instruction counts skipped" >&2; INSN=0; }

# --- instructions per request (callgrind) ------------------------------------
# cg_run NAME SECONDS: one server under callgrind; SECONDS of wrk (0: none);
# prints "REQUESTS INSTRUCTIONS".
cg_run() {
  local name=$1 secs=$2 dir="$OUT/callgrind" vp wp="" n=0 url lua port file
  mkdir -p "$dir/nginx/www" "$dir/nginx/tmp" && chmod 777 "$dir"   # nginx's worker runs as nobody
  printf ok >"$dir/nginx/www/ok.txt"
  if [ "$name" = sluice ]; then
    taskset -c "$SRV_CPU" valgrind --tool=callgrind --callgrind-out-file="$dir/sluice_$secs.out" \
      "$SLUICE" serve --rules "$RULES" --listen "127.0.0.1:$PORT" --threads 1 2>"$dir/sluice_$secs.log" &
    vp=$!; port=$PORT; url=$SLUICE_URL; lua=$LUA
  else
    taskset -c "$SRV_CPU" valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$dir/nginx_%p.out" \
      nginx -p "$dir/nginx/" -c "$PEERS_DIR/nginx/nginx.conf" -e "$dir/nginx/error.log" 2>"$dir/nginx_$secs.log" &
    vp=$!; port=18088; url=$NGINX_URL; lua=$KEYS_LUA
  fi
  wait_port "$port" >&2 && sleep 1
  [ "$name" = nginx ] && wp=$(pgrep -P "$vp")
  if [ "$secs" -gt 0 ]; then
    taskset -c "$CLI_CPU" wrk -t1 -c"$CONNS" -d"${secs}s" -s "$lua" "$url" >"$dir/${name}_wrk_$secs.txt" 2>&1
    n=$(awk '/requests in/ {print $1}' "$dir/${name}_wrk_$secs.txt")
  fi
  if [ "$name" = sluice ]; then stop_pid "$vp"; file="$dir/sluice_$secs.out"
  else stop_pid "$vp" QUIT; file="$dir/nginx_$wp.out"; mv "$file" "$dir/nginx_$secs.out"; file="$dir/nginx_$secs.out"; fi
  echo "$n $(awk '/^summary:/ {print $2}' "$file")"
}
declare -A IPR
if [ "$INSN" = 1 ]; then
  for s in sluice nginx; do
    read -r n0 i0 < <(cg_run "$s" 0)
    read -r n1 i1 < <(cg_run "$s" "$INSN_DUR")
    IPR[$s]=$(( (i1 - i0) / n1 ))
    echo "$s: ${IPR[$s]} user-space instructions per request (callgrind: $i1 - $i0 instructions, $n1 requests)" |
      tee -a "$OUT/insn.txt"
  done
fi

# --- servers -----------------------------------------------------------------
SPID=""; NPID=""
cleanup() { stop_pid "$SPID"; stop_pid "$NPID" QUIT; }
trap cleanup EXIT
trap 'exit 130' INT TERM

if (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; then
  echo "port $PORT is already in use; set PORT=" >&2; exit 1
fi
taskset -c "$SRV_CPU" "$SLUICE" serve --rules "$RULES" --listen "127.0.0.1:$PORT" --threads 1 \
  2>"$OUT/sluice.log" &
SPID=$!
wait_port "$PORT" && sleep 0.3 && kill -0 "$SPID" 2>/dev/null ||
  { echo "sluice did not start (port $PORT taken? see $OUT/sluice.log)" >&2; exit 1; }
NPID=$("$PEERS_DIR/nginx/start.sh") || { echo "nginx did not start" >&2; exit 1; }
NWORKERS=$(pgrep -P "$NPID" | wc -l)
NPIDS="$NPID $(pgrep -P "$NPID" | tr '\n' ' ')"
grep -q '^worker_processes 1;' "$PEERS_DIR/nginx/nginx.conf" ||
  echo "warning: the peer nginx.conf does not say worker_processes 1" >&2

# one check that both answer what we think
curl -fsS -o /dev/null -X POST -d '{"domain":"bench","descriptors":[{"entries":[{"key":"api_key","value":"k000001"}]}]}' "$SLUICE_URL" ||
  { echo "sluice /v1/check failed" >&2; exit 1; }
curl -fsS -o /dev/null -H 'X-Api-Key: k000001' "$NGINX_URL" || { echo "nginx $NGINX_URL failed" >&2; exit 1; }

# --- measurement helpers -------------------------------------------------------
# wrk_run OUTFILE DURATION "SERVER PIDS" URL [env assignments...] -- [wrk args]
wrk_run() {
  local out=$1 dur=$2 pids=$3 url=$4; shift 4
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  local t0 t1 w0 w1 q0 q1
  { echo "# cmd: ${envs[*]} ${WRK_PRE:-} taskset -c $CLI_CPU wrk -t1 -c$CONNS -d$dur --latency $* $url"
    wait_quiet; date -u +%FT%TZ; } >"$out"
  t0=$(cpu_ticks $pids); w0=$(date +%s%N); q0=$(runq_wait_ns $pids)
  env "${envs[@]}" timeout 120 ${WRK_PRE:-} taskset -c "$CLI_CPU" wrk -t1 -c"$CONNS" -d"$dur" --latency "$@" "$url" >>"$out" 2>&1
  t1=$(cpu_ticks $pids); w1=$(date +%s%N); q1=$(runq_wait_ns $pids)
  echo "# server_ticks: $((t1 - t0))" >>"$out"
  echo "# wall_ns: $((w1 - w0))" >>"$out"
  echo "# server_runq_wait_us: $(( (q1 - q0) / 1000 ))" >>"$out"
}
rps_of() { awk '/^Requests\/sec:/ {print $2}' "$1"; }

# run_case NAME PIDS URL LUAENV...   -- peak, then paced at half that peak
declare -A PEAK
peak_run() {  # peak_run NAME ROUND PIDS URL wrk-args...
  local name=$1 r=$2 pids=$3 url=$4; shift 4
  wrk_run "$OUT/${name}_peak_$r.txt" "$DUR" "$pids" "$url" -- "$@"
  PEAK[$name]=$(rps_of "$OUT/${name}_peak_$r.txt")
  echo "round $r $name peak: ${PEAK[$name]} req/s"
}
paced_run() {  # paced_run NAME ROUND PIDS URL [INCLUDE=...]
  local name=$1 r=$2 pids=$3 url=$4; shift 4
  local target d0 r0 d1 r1 d2 WRK_PRE=""
  if [ "$RT" = 1 ]; then rt_policy on "$pids"; WRK_PRE="chrt -f 1"; fi
  target=$(awk -v p="${PEAK[$name]}" 'BEGIN{printf "%.0f", p/2}')
  # Two CAL-long calibration runs find the delay: the loop period C/rate is
  # not exactly delay + latency (wrk's 1 ms timers), so start from
  # d0 = C/target, scale it by the rate achieved (d1 = d0 * r0/target), then
  # interpolate linearly between the two (delay, period) points.
  d0=$(awk -v c="$CONNS" -v t="$target" 'BEGIN{printf "%.4f", c*1000/t}')
  wrk_run "$OUT/${name}_cal0_$r.txt" "$CAL" "$pids" "$url" "$@" DELAY_MS="$d0" -- -s "$LUA"
  r0=$(rps_of "$OUT/${name}_cal0_$r.txt")
  d1=$(awk -v d0="$d0" -v r0="$r0" -v t="$target" 'BEGIN{printf "%.4f", d0*r0/t}')
  wrk_run "$OUT/${name}_cal1_$r.txt" "$CAL" "$pids" "$url" "$@" DELAY_MS="$d1" -- -s "$LUA"
  r1=$(rps_of "$OUT/${name}_cal1_$r.txt")
  d2=$(awk -v c="$CONNS" -v t="$target" -v d0="$d0" -v r0="$r0" -v d1="$d1" -v r1="$r1" 'BEGIN{
        P=c*1000/t; P0=c*1000/r0; P1=c*1000/r1;
        if (d1 != d0 && (P1-P0)/(d1-d0) > 0) d = d1 + (P-P1)*(d1-d0)/(P1-P0); else d = d1*r1/t;
        if (d < 0) d = 0; if (d > 4*d0) d = 4*d0; printf "%.4f", d}')
  wrk_run "$OUT/${name}_half_$r.txt" "$DUR" "$pids" "$url" "$@" DELAY_MS="$d2" -- -s "$LUA"
  [ "$RT" = 1 ] && rt_policy off "$pids"
  echo "# target_rps: $target delay_ms: $d2 (calibration: delay $d0 -> $r0 req/s, $d1 -> $r1 req/s)" >>"$OUT/${name}_half_$r.txt"
  echo "round $r $name ~50%: target $target, got $(rps_of "$OUT/${name}_half_$r.txt") req/s (delay ${d2} ms; cal $d0->$r0, $d1->$r1)"
}

{
  if [ -n "$REV" ]; then echo "# sluice: commit $(git -C "$ROOT" rev-parse --short "$REV") (clean build in $BUILD)"
  else echo "# sluice: working tree at $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src tools CMakeLists.txt || echo ', with uncommitted changes'), binary $SLUICE"; fi
  echo "# date: $(date -u +%FT%TZ)"
  echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "# nginx: $(nginx -v 2>&1 | sed 's/.*: //'), worker processes: $NWORKERS"
  echo "# wrk: $(wrk -v 2>&1 | head -1)"
  echo "# rounds $ROUNDS, DUR $DUR, CAL $CAL, conns $CONNS, QUIET_MAX $QUIET_MAX, RT $RT"
  echo "# $HWC"
} | tee "$OUT/meta.txt"

for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then order="sluice nginx"; else order="nginx sluice"; fi
  for s in $order; do
    case $s in
      sluice) peak_run sluice "$r" "$SPID" "$SLUICE_URL" -s "$LUA" ;;
      nginx)  peak_run nginx "$r" "$NPIDS" "$NGINX_URL" -s "$KEYS_LUA" ;;
    esac
  done
  for s in $order; do
    case $s in
      sluice) paced_run sluice "$r" "$SPID" "$SLUICE_URL" ;;
      nginx)  paced_run nginx "$r" "$NPIDS" "$NGINX_URL" INCLUDE="$KEYS_LUA" ;;
    esac
  done
done

# --- summary -------------------------------------------------------------------
python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/summary.md"
import re, sys, statistics as st
out, rounds = sys.argv[1], int(sys.argv[2])
def us(v):
    m = re.match(r'([\d.]+)(us|ms|s)$', v)
    return float(m.group(1)) * {'us': 1, 'ms': 1e3, 's': 1e6}[m.group(2)]
def parse(path):
    t = open(path).read()
    d = {'rps': float(re.search(r'Requests/sec:\s+([\d.]+)', t).group(1))}
    d['p50'] = us(re.search(r'^\s+50%\s+(\S+)', t, re.M).group(1))
    d['p99'] = us(re.search(r'^\s+99%\s+(\S+)', t, re.M).group(1))
    n = int(re.search(r'(\d+) requests in', t).group(1))
    d['non2xx'] = int((re.search(r'Non-2xx or 3xx responses: (\d+)', t) or [0, 0])[1])
    d['err'] = bool(re.search(r'Socket errors', t))
    ticks = int(re.search(r'# server_ticks: (\d+)', t).group(1))
    d['cpu_us'] = ticks * 1e4 / n if n else float('nan')   # 1 tick = 10 ms
    d['quiet'] = re.search(r'# quiet_wait_s: (\d+)( \(gave up)?', t)
    d['runq_ms'] = int(re.search(r'# server_runq_wait_us: (\d+)', t).group(1)) / 1e3
    return d
R = {(s, k, r): parse(f'{out}/{s}_{k}_{r}.txt')
     for s in ('sluice', 'nginx') for k in ('peak', 'half') for r in range(1, rounds + 1)}
med = lambda xs: st.median(xs)
def col(s, k, f): return [R[(s, k, r)][f] for r in range(1, rounds + 1)]
def ratio(k, f): return med([R[('sluice', k, r)][f] / R[('nginx', k, r)][f] for r in range(1, rounds + 1)])
rows = [
    ('peak requests/s (sluice: decisions/s)', 'peak', 'rps', '{:,.0f}'),
    ('server CPU per request at peak', 'peak', 'cpu_us', '{:.2f} µs'),
    ('rate held for the latency runs', 'half', 'rps', '{:,.0f}'),
    ('p50 latency at ~50% of own peak', 'half', 'p50', '{:.0f} µs'),
    ('p99 latency at ~50% of own peak', 'half', 'p99', '{:.0f} µs'),
    ('server CPU per request at ~50%', 'half', 'cpu_us', '{:.2f} µs'),
]
print(f'Medians of {rounds} alternating rounds; ratio = median of the per-round ratios sluice/nginx.\n')
print('| measure | sluice serve | nginx limit_req | ratio sluice/nginx |')
print('|---|---|---|---|')
for name, k, f, fmt in rows:
    print(f'| {name} | {fmt.format(med(col("sluice", k, f)))} | {fmt.format(med(col("nginx", k, f)))} | {ratio(k, f):.2f} |')
print()
for s in ('sluice', 'nginx'):
    pk = col(s, 'peak', 'rps'); hf = col(s, 'half', 'rps')
    print(f'- {s}: peak per round ' + ', '.join(f'{x:,.0f}' for x in pk) +
          '; ~50% runs held ' + ', '.join(f'{h/p*100:.0f}%' for h, p in zip(hf, pk)) + ' of that round\'s peak' +
          '; p99 per round ' + ', '.join(f'{x:.0f}' for x in col(s, 'half', 'p99')) + ' µs' +
          ' (the server waited for its CPU ' + ', '.join(f'{x:.1f}' for x in col(s, 'half', 'runq_ms')) + ' ms in those runs)' +
          f'; non-2xx responses {sum(col(s, "peak", "non2xx")) + sum(col(s, "half", "non2xx"))}')
ipr = {}
try:
    for line in open(f'{out}/insn.txt'):
        ipr[line.split(':')[0]] = int(line.split()[1])
except OSError:
    pass
if len(ipr) == 2:
    print(f'- user-space instructions per request (callgrind): sluice {ipr["sluice"]:,}, nginx {ipr["nginx"]:,}, ratio {ipr["sluice"] / ipr["nginx"]:.2f}')
busy = [f'{s} {k} {r}' for (s, k, r), d in R.items() if d['quiet'] and d['quiet'].group(2)]
print(f'- runs started on a busy machine (wait_quiet gave up): {", ".join(busy) if busy else "none"}')
PY
echo "raw output: $OUT"
