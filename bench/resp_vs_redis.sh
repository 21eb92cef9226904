#!/bin/bash
# bench/resp_vs_redis.sh [BINARY] - `sluice serve --resp-listen` answering
# redis-cell's CL.THROTTLE, against redis-server running the peers' GCRA
# Lua script by EVALSHA (../shared/peers/redis/gcra.lua) and against
# redis-server's own INCR (the floor for any command over RESP), under the
# same load: redis-benchmark -P 16 -c 50 -r 100000 (CPU 1), each server
# on one thread (CPU 0), the memory store.
#
# Two measures, each printed with its ratios:
#   1. decisions/s, ROUNDS rounds (default 3) of the three cases in turn
#      (so the machine's noise hits all alike), with each server's CPU time
#      per command from /proc;
#   2. user-space instructions per command under callgrind (this VM has
#      no hardware counters; callgrind repeats to a few parts per
#      thousand): (I(N2) - I(N1)) / (N2 - N1), so start-up cancels out.
#
#   bench/resp_vs_redis.sh build-bench/sluice
#   ROUNDS=5 N=3000000 bench/resp_vs_redis.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build-bench/sluice}
[ -x "$bin" ] || { echo "no $bin: cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release && cmake --build build-bench" >&2; exit 2; }
peers=$(cd .. && pwd)/shared/peers
lua=$peers/redis/gcra.lua
[ -f "$lua" ] || { echo "no $lua (the peers' scripts)" >&2; exit 2; }
ROUNDS=${ROUNDS:-3}
N=${N:-2000000}
sport=18621
rport=18622
load=(-P 16 -c 50 -r 100000)
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

ticks() { # PID -> user+system ticks
  local f
  f=$(cut -d')' -f2 "/proc/$1/stat")
  set -- $f
  echo $((${12} + ${13}))
}
wait_port() {
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing on port $1" >&2
  exit 1
}
# bench PORT N CMD... -> "rps"
bench() {
  local port=$1 n=$2
  shift 2
  taskset -c 1 redis-benchmark -p "$port" "${load[@]}" -n "$n" --csv "$@" 2>/dev/null |
    tail -1 | cut -d, -f2 | tr -d '"'
}

# ---- 1. decisions/s ----
taskset -c 0 "$bin" serve --rules examples/rules --listen 127.0.0.1:0 \
  --resp-listen 127.0.0.1:$sport --threads 1 2>"$tmp/sluice.log" &
spid=$!
pids+=("$spid")
taskset -c 0 redis-server --port $rport --bind 127.0.0.1 --save "" \
  --appendonly no >/dev/null 2>&1 &
rpid=$!
pids+=("$rpid")
wait_port $sport
wait_port $rport
sha=$(redis-cli -p $rport SCRIPT LOAD "$(cat "$lua")")
echo "# redis-benchmark ${load[*]} -n $N; servers on CPU 0 (sluice --threads 1), the client on CPU 1"
printf '%-8s %-28s %12s %14s\n' round case decisions/s "server us/cmd"
declare -A sum
for r in $(seq "$ROUNDS"); do
  for c in cl.throttle lua_gcra incr; do
    case $c in
      cl.throttle) port=$sport pid=$spid cmd=(CL.THROTTLE "u:__rand_int__" 15 30 60 1) ;;
      lua_gcra) port=$rport pid=$rpid cmd=(EVALSHA "$sha" 1 "rl:gc:__rand_int__" 10 100) ;;
      incr) port=$rport pid=$rpid cmd=(INCR "rl:incr:__rand_int__") ;;
    esac
    redis-cli -p $rport FLUSHALL >/dev/null
    t0=$(ticks "$pid")
    rps=$(bench "$port" "$N" "${cmd[@]}")
    t1=$(ticks "$pid")
    us=$(awk -v t=$((t1 - t0)) -v n="$N" 'BEGIN { printf "%.2f", t * 10000 / n }')
    printf '%-8s %-28s %12.0f %14s\n' "$r" "$c" "$rps" "$us"
    sum[$c]=$(awk -v a="${sum[$c]:-0}" -v b="$rps" 'BEGIN { print a + b }')
  done
done
awk -v s="${sum[cl.throttle]}" -v l="${sum[lua_gcra]}" -v i="${sum[incr]}" 'BEGIN {
  printf "decisions/s, mean of the rounds: CL.THROTTLE / Lua GCRA = %.2fx, CL.THROTTLE / INCR = %.2fx\n", s / l, s / i }'
kill "$spid" "$rpid"
wait "$spid" "$rpid" 2>/dev/null || true
pids=()

# ---- 2. instructions per command (callgrind) ----
n1=${N1:-100000}
n2=${N2:-300000}
insn() { # sluice|lua_gcra|incr N -> total user-space instructions
  local out=$tmp/cg.out vp port
  rm -f "$out"
  if [ "$1" = sluice ]; then
    port=$sport
    taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" \
      serve --rules examples/rules --listen 127.0.0.1:0 \
      --resp-listen 127.0.0.1:$sport --threads 1 2>/dev/null &
    vp=$!
    wait_port $sport
    bench $port "$2" CL.THROTTLE "u:__rand_int__" 15 30 60 1 >/dev/null
    kill -TERM $vp
  else
    port=$rport
    taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$out" \
      redis-server --port $rport --bind 127.0.0.1 --save "" --appendonly no \
      >/dev/null 2>&1 &
    vp=$!
    wait_port $rport
    if [ "$1" = lua_gcra ]; then
      sha=$(redis-cli -p $rport SCRIPT LOAD "$(cat "$lua")")
      bench $port "$2" EVALSHA "$sha" 1 "rl:gc:__rand_int__" 10 100 >/dev/null
    else
      bench $port "$2" INCR "rl:incr:__rand_int__" >/dev/null
    fi
    redis-cli -p $rport SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  fi
  wait $vp 2>/dev/null || true
  grep -m1 '^summary:\|^totals:' "$out" | awk '{print $2}'
}
echo "# user-space instructions per command (callgrind, N = $n1 and $n2)"
declare -A per
for c in sluice lua_gcra incr; do
  i1=$(insn $c "$n1")
  i2=$(insn $c "$n2")
  per[$c]=$(((i2 - i1) / (n2 - n1)))
  printf '%-12s %8d instructions per command\n' "$c" "${per[$c]}"
done
awk -v s="${per[sluice]}" -v l="${per[lua_gcra]}" -v i="${per[incr]}" 'BEGIN {
  printf "instructions: Lua GCRA / CL.THROTTLE = %.2fx, INCR / CL.THROTTLE = %.2fx\n", l / s, i / s }'
