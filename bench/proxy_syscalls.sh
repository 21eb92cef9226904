#!/bin/bash
# bench/proxy_syscalls.sh - what `sluice proxy` and nginx (proxy_pass +
# limit_req) ask of the kernel per request in bench/proxy_vs_nginx.sh's
# case "limited" (one client address, 10 r/s, nearly every request
# answered 429 by the proxy), in counts that another session's load on
# this shared machine does not move, unlike wall-clock latency:
#
#   bench/proxy_syscalls.sh             # DUR=5 s per proxy
#
# For each proxy (each alone on CPU 0, one worker / one event-loop
# thread, the same config and upstream as bench/proxy_vs_nginx.sh; wrk
# -t1 -c50 on CPU 1):
#   - system calls by type, context switches, CPU migrations and task
#     clock of the proxy process, per request (perf stat, tracepoints);
#   - the service order: for each client connection, how many requests
#     of other connections the proxy read between two reads of this one
#     (perf record of read/recvfrom).  Served first come, first served,
#     it is 49 with 50 connections; every request more is one more
#     service time (about 8 µs here) that a request waits.  Printed as
#     percentiles: p99 of this is what wrk's p99 latency follows;
#   - wrk's own user-space instructions per response (callgrind, a 2 s
#     and a 5 s run, the difference divided), the client's cost of
#     parsing each proxy's answer.
# Needs perf with tracepoint access (root) and valgrind.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SLUICE="${SLUICE:-$ROOT/build-bench/sluice}"
DUR="${DUR:-5}"
PORT="${PORT:-18660}" # sluice; upstream PORT+1, nginx PORT+2
UP=$((PORT + 1))
export PATH="$PATH:/usr/sbin"
source "$HERE/lib.sh"
W="$(mktemp -d)"
chmod 755 "$W"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -QUIT "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
ports_free "$PORT" $((PORT + 2))

upstream_conf "$W/up" "$UP" "worker_cpu_affinity 01;"
nginx_dir "$W/px"
{
  nginx_head "worker_cpu_affinity 01;"
  limit_req_http "$UP"
  cat <<Y
    server { listen 127.0.0.1:$((PORT + 2)); location / { limit_req zone=ip_lo; proxy_pass http://backend; } }
}
Y
} >"$W/px/nginx.conf"
proxy_yaml "$W/proxy.yaml" "$PORT" "$UP"

taskset -c 0 nginx -p "$W/up/" -c "$W/up/nginx.conf" -e "$W/up/error.log" &
PIDS+=($!)
taskset -c 0 nginx -p "$W/px/" -c "$W/px/nginx.conf" -e "$W/px/error.log" &
NPID=$!
PIDS+=("$NPID")
taskset -c 0 "$SLUICE" proxy --config "$W/proxy.yaml" 2>"$W/sluice.log" &
SPID=$!
PIDS+=("$SPID")
wait_up "$UP"
wait_up "$PORT"
wait_up $((PORT + 2))
sleep 0.3
NWORKER=$(pgrep -P "$NPID")

echo "# sluice $(git -C "$ROOT" rev-parse --short HEAD), $SLUICE; $(nginx -v 2>&1 | sed 's/.*: //'); $(uname -r)"
for who in sluice nginx; do
  if [ "$who" = sluice ]; then
    pid=$SPID url="http://127.0.0.1:$PORT/limited" rd=read
  else
    pid=$NWORKER url="http://127.0.0.1:$((PORT + 2))/" rd=recvfrom
  fi
  perf stat -x, -e 'syscalls:sys_enter_*' \
    -e context-switches,cpu-migrations,task-clock -p "$pid" -o "$W/stat" &
  sp=$!
  # The service order from the middle of the run: 2 s of reads.
  (sleep 2 && perf record -q -e "syscalls:sys_enter_$rd" -p "$pid" \
    -o "$W/order.data" -- sleep 2 >/dev/null 2>&1) &
  rp=$!
  sleep 1 # perf stat attaches to some 700 tracepoints before it counts
  n=$(taskset -c 1 wrk -t1 -c50 -d"$DUR"s --latency "$url" |
    tee "$W/wrk_$who" | sed -n 's/ *\([0-9]*\) requests in.*/\1/p')
  wait "$rp"
  kill -INT "$sp"
  wait "$sp" || true
  echo "$who: $n requests in $DUR s; wrk: $(awk '/Requests\/sec/ {r=$2} /^ +99%/ {p=$2} END {print r " req/s, p99 " p}' "$W/wrk_$who")"
  awk -F, -v n="$n" '$1 + 0 > 0 && $1 / n >= 0.001 {
    sub(/^syscalls:sys_enter_/, "", $3)
    printf "  %-18s %8.4f per request\n", $3 ($3 == "task-clock" ? " (µs)" : ""),
      ($3 == "task-clock" ? 1000 : 1) * $1 / n }' "$W/stat"
  perf script -i "$W/order.data" -F trace 2>/dev/null |
    sed -n 's/^fd: 0x\([0-9a-f]*\),.*/\1/p' | python3 -c '
import sys
last, gaps = {}, []
for i, fd in enumerate(sys.stdin.read().split()):
    if fd in last:
        gaps.append(i - last[fd] - 1)
    last[fd] = i
gaps.sort()
q = lambda p: gaps[min(len(gaps) - 1, int(p * len(gaps)))]
print("  service order: requests of other connections between two of one: "
      "p50 %d, p90 %d, p99 %d, p99.9 %d (%d reads)"
      % (q(.5), q(.9), q(.99), q(.999), len(gaps) + len(last)))'
  for s in 2 5; do
    c=$(taskset -c 1 valgrind --tool=callgrind --callgrind-out-file="$W/cg" \
      wrk -t1 -c50 -d"$s"s "$url" 2>/dev/null | sed -n 's/ *\([0-9]*\) requests in.*/\1/p')
    eval "n$s=$c i$s=$(grep -m1 '^summary:\|^totals:' "$W/cg" | awk '{print $2}')"
  done
  echo "  wrk (the client): $(((i5 - i2) / (n5 - n2))) user-space instructions per response"
  for _ in 1 2 3; do # a 429 (the first request after a pause may pass)
    curl -s -D "$W/head" -o "$W/body" "$url"
    grep -q '^HTTP/1.1 429' "$W/head" && break
  done
  echo "  answer: $(head -1 "$W/head" | tr -d '\r'), $(wc -c <"$W/head") bytes of head, $(wc -c <"$W/body") of body"
done
