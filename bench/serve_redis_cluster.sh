#!/bin/bash
# sluice serve on one Redis vs on a Redis Cluster of three masters, same
# load, alternating runs: what routing by slot costs (or gains) per node.
#
#   bench/serve_redis_cluster.sh             # 3 alternating rounds, 10 s each
#   ROUNDS=5 DUR=20s bench/serve_redis_cluster.sh
#
# Load: wrk -t1 -c$CONNS -d$DUR POST /v1/check of one descriptor, api_key
# = a random key of 100k (bench/wrk_check.lua), token_bucket 100/s burst
# 100 (bench/serve_redis_rules.yaml); sluice serve --threads 1.  On this
# 2-core VM the Redis servers (one, or three masters) share CPU 0 and
# sluice and wrk share CPU 1, so a cluster cannot add Redis CPU here: the
# figure says what the routing costs the node, not how a cluster scales.
# Output: one line per run, "name round=N rps=... p99_ms=...", and the
# node's store failures so far (0: every decision came from Redis); then,
# from each redis-server's own CPU time (/proc/PID/stat) and INFO
# commandstats over the run, Redis CPU per decision (all shards) and per
# script call, script calls per decision, and each shard's share of the
# calls: what a shard costs per decision as the keys spread, the figure
# the fleet model in docs/benchmarks.md ("Scaling out") is made of.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-10s}"
CONNS="${CONNS:-50}"
SLUICE="${SLUICE:-$ROOT/build/sluice}"
TMP=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# redis-server on CPU 0: start_redis DIR PORT [cluster args...]
start_redis() {
  local dir=$1 port=$2
  shift 2
  mkdir -p "$dir"
  taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --save "" \
    --appendonly no --dir "$dir" "$@" >"$dir/log" 2>&1 &
  PIDS+=($!)
  RPID[$port]=$!
  for _ in $(seq 100); do
    redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && return
    sleep 0.05
  done
  echo "redis-server on $port did not start" >&2
  exit 1
}

declare -A RPID
ONE=$(free_port)
start_redis "$TMP/one" "$ONE"
CL=()
for i in 0 1 2; do
  CL+=("$(free_port)")
  start_redis "$TMP/c$i" "${CL[$i]}" --cluster-enabled yes \
    --cluster-config-file nodes.conf --cluster-port "$(free_port)"
done
redis-cli --cluster create "${CL[@]/#/127.0.0.1:}" --cluster-yes >"$TMP/create.log" 2>&1 ||
  { cat "$TMP/create.log"; exit 1; }
for _ in $(seq 100); do
  redis-cli -p "${CL[0]}" CLUSTER INFO | grep -q cluster_state:ok && break
  sleep 0.1
done

# sluice serve on CPU 1: start_sluice NAME STORE -> its port in $PORT
start_sluice() {
  PORT=$(free_port)
  taskset -c 1 "$SLUICE" serve --rules "$HERE/serve_redis_rules.yaml" --public-metrics true \
    --listen "127.0.0.1:$PORT" --threads 1 --store "$2" \
    --redis-timeout 50ms 2>"$TMP/$1.log" &
  PIDS+=($!)
  for _ in $(seq 100); do
    curl -s "http://127.0.0.1:$PORT/readyz" | grep -q '"store_status":"up"' && return
    sleep 0.1
  done
  echo "sluice serve ($1) did not come up" >&2
  exit 1
}

start_sluice one "redis://127.0.0.1:$ONE"
P_ONE=$PORT
start_sluice cluster "redis-cluster://127.0.0.1:${CL[0]}"
P_CL=$PORT

# cost PORT: "cpu_ticks script_calls" of the redis-server on PORT so far.
cost() {
  local ticks calls
  ticks=$(awk '{print $14 + $15}' "/proc/${RPID[$1]}/stat")
  calls=$(redis-cli -p "$1" INFO commandstats | tr -d '\r' |
    awk -F'[=:,]' '/^cmdstat_(eval|evalsha|fcall)/ {n += $3} END {print n + 0}')
  echo "$ticks $calls"
}

run() { # name port round shard-ports...
  local name=$1 port=$2 round=$3
  shift 3
  local before=() s
  for s in "$@"; do before+=("$(cost "$s")"); done
  taskset -c 1 wrk -t1 -c"$CONNS" -d"$DUR" --latency -s "$HERE/wrk_check.lua" \
    "http://127.0.0.1:$port" >"$TMP/${name}_$round.txt" 2>&1
  local after=()
  for s in "$@"; do after+=("$(cost "$s")"); done
  local rps p99
  rps=$(awk '/^Requests\/sec/ {print $2}' "$TMP/${name}_$round.txt")
  p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000}
        else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}
        print v}' "$TMP/${name}_$round.txt")
  local failures
  failures=$(curl -s "http://127.0.0.1:$port/metrics" |
    awk '/^sluice_store_failures_total/ {n += $2} END {print n + 0}')
  echo "sluice_serve_$name round=$round rps=$rps p99_ms=$p99 store_failures_so_far=$failures"
  local requests
  requests=$(awk '/requests in/ {print $1}' "$TMP/${name}_$round.txt")
  python3 - "$name" "$round" "$requests" "$(getconf CLK_TCK)" "${before[@]}" -- "${after[@]}" <<'PY'
import sys
name, rnd, requests, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rest = sys.argv[5:]
cut = rest.index("--")
b = [tuple(map(int, x.split())) for x in rest[:cut]]
a = [tuple(map(int, x.split())) for x in rest[cut + 1:]]
cpu = [(x[0] - y[0]) / hz for x, y in zip(a, b)]
calls = [x[1] - y[1] for x, y in zip(a, b)]
total_calls = sum(calls) or 1
print(f"  {name} round={rnd} decisions={requests} redis_cpu_us_per_decision="
      f"{sum(cpu) * 1e6 / max(requests, 1):.2f} script_calls_per_decision="
      f"{sum(calls) / max(requests, 1):.3f} redis_cpu_us_per_call="
      f"{sum(cpu) * 1e6 / total_calls:.1f} shard_shares="
      + ",".join(f"{c / total_calls:.2f}" for c in calls)
      + " shard_cpu_s=" + ",".join(f"{c:.2f}" for c in cpu))
PY
}

for r in $(seq "$ROUNDS"); do
  run one_redis "$P_ONE" "$r" "$ONE"
  run cluster_3_masters "$P_CL" "$r" "${CL[@]}"
done
