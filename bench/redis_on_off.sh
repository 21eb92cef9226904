#!/bin/bash
# The body of bench/redis_negative_cache.sh, bench/redis_lease.sh and
# bench/redis_tiers.sh: `sluice serve --store redis` with a feature off
# (its tables' flags 0, the exact path) and on (4 MiB), and the peer's
# Redis+Lua token bucket, in the same run on one Redis, on the loads of
# bench/wrk_negcache.lua;
# what each measures is said in those files.  Sourced by them with:
#   BENCH     the results' prefix; the rules are bench/${BENCH}_rules.yaml
#   FLAG      the tables' flags (--negative-cache-bytes, --lease-bytes, or
#             both), each given the same bytes
#   ON        the name of the runs with it on
#   PEER_ARGS the peer's token bucket: "rate burst"
#   MIXES     the loads (default "hot abuse"; also random, and tbhot:
#             bench/wrk_negcache.lua); the peer runs its hot key for any
#             but abuse and random
# Layout (2 cores): redis-server pinned to CPU 0; sluice serve --threads 1
# and wrk -t1 (or redis-benchmark) on CPU 1.
# Measures per run: decisions/s, Redis's CPU per decision (utime + stime
# of /proc/<redis pid>/stat, in µs), Redis script calls per decision (INFO
# commandstats: FCALL + EVALSHA; sluice batches the calls of a loop
# iteration into one), the decisions sent to Redis per decision (alone or
# in a batch: sluice_store_calls_total) and the share refused; and how
# many decisions the failure policy made (a timeout of 1 s: none).  Output: one line
# per run, then the medians and their ratios to the peer's.
set -u
ROOT="$(cd "$HERE/.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}"
source "$PEERS_DIR/common.sh" # cpu_ticks
ROUNDS="${ROUNDS:-3}"
DUR="${DUR:-10s}"
CONNS="${CONNS:-50}"
RPORT="${RPORT:-16489}"
PORT="${PORT:-18220}"
SLUICE="${SLUICE:-$ROOT/build/sluice}"
N_PEER="${N_PEER:-300000}"
THREADS="${THREADS:-1}" # sluice's loop threads (each has its own table)
HZ=$(getconf CLK_TCK)
OUT="$ROOT/bench/results/${BENCH}_$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
CLI="redis-cli -h 127.0.0.1 -p $RPORT"

taskset -c 0 redis-server --port "$RPORT" --bind 127.0.0.1 --save "" \
  --appendonly no --daemonize no >"$OUT/redis.log" 2>&1 &
RPID=$!
SPID=
trap 'kill $SPID $RPID 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 100); do $CLI PING 2>/dev/null | grep -q PONG && break; sleep 0.1; done
TB=$($CLI SCRIPT LOAD "$(cat "$PEERS_DIR/redis/token_bucket.lua")")

script_calls() {
  $CLI INFO commandstats | tr -d '\r' |
    sed -n 's/^cmdstat_\(fcall\|evalsha\):calls=\([0-9]*\).*/\2/p' |
    awk '{s += $1} END {print s + 0}'
}

start_sluice() { # $1: the tables' bytes
  local flags=() f
  for f in $FLAG; do flags+=("$f" "$1"); done
  taskset -c 1 "$SLUICE" serve --rules "$HERE/${BENCH}_rules.yaml" \
    --listen "127.0.0.1:$PORT" --threads "$THREADS" --store "redis://127.0.0.1:$RPORT" \
    --redis-timeout 1s "${flags[@]}" --public-metrics true \
    2>>"$OUT/sluice.log" &
  SPID=$!
  for _ in $(seq 100); do
    curl -s "http://127.0.0.1:$PORT/readyz" | grep -q '"store_status":"up"' && return
    sleep 0.1
  done
}

stop_sluice() { kill "$SPID"; wait "$SPID" 2>/dev/null; SPID=; }

# The daemon's decisions sent to Redis, alone or in a batch; and those
# the failure policy decided (none expected: a timeout of 1 s).
sent() {
  curl -s "http://127.0.0.1:$PORT/metrics" | awk '$1 == "sluice_store_calls_total" {print $2}'
}
fallbacks() {
  curl -s "http://127.0.0.1:$PORT/metrics" |
    awk '$1 ~ /^sluice_store_fallback_decisions_total/ {s += $2} END {print s + 0}'
}

# name mix round decisions rps redis-ticks script-calls sent refused:
# one line of figures.
report() {
  local name=$1 mix=$2 r=$3 n=$4 rps=$5 ticks=$6 calls=$7 sent=$8 refused=$9
  awk -v name="$name" -v mix="$mix" -v r="$r" -v n="$n" -v rps="$rps" -v t="$ticks" \
      -v hz="$HZ" -v c="$calls" -v s="$sent" -v x="$refused" 'BEGIN {
    printf "%s mix=%s round=%s rps=%s redis_cpu_us_per_decision=%.3f redis_calls_per_decision=%.4f sent_per_decision=%.4f refused_pct=%.1f\n",
      name, mix, r, rps, n ? t * 1e6 / hz / n : 0, n ? c / n : 0, n ? s / n : 0, n ? 100 * x / n : 0 }'
}

run_sluice() { # name bytes mix round
  $CLI FLUSHALL >/dev/null
  start_sluice "$2"
  local t0 c0 s0 f0 t1 c1 s1 f="$OUT/$1_$3_$4.txt"
  t0=$(cpu_ticks $RPID); c0=$(script_calls); s0=$(sent); f0=$(fallbacks)
  MIX=$3 taskset -c 1 wrk -t1 -c"$CONNS" -d"$DUR" -s "$HERE/wrk_negcache.lua" \
    "http://127.0.0.1:$PORT" >"$f" 2>&1
  t1=$(cpu_ticks $RPID); c1=$(script_calls); s1=$(sent)
  echo "# $1 $3 round $4: $(( $(fallbacks) - f0 )) decisions by the failure policy" >>"$OUT/fallbacks.txt"
  stop_sluice
  report "$1" "$3" "$4" "$(awk '/requests in/ {print $1}' "$f")" \
    "$(awk '/^Requests\/sec/ {print $2}' "$f")" $((t1 - t0)) $((c1 - c0)) $((s1 - s0)) \
    "$(awk '/Non-2xx/ {print $NF}' "$f" | grep . || echo 0)"
}

run_peer() { # mix round
  $CLI FLUSHALL >/dev/null
  local key=rl:tb:hot rnd=() t0 c0 t1 c1 f="$OUT/peer_$1_$2.txt"
  [ "$1" = abuse ] && key=rl:tb:__rand_int__ rnd=(-r 2000)
  [ "$1" = random ] && key=rl:tb:__rand_int__ rnd=(-r 100000)
  t0=$(cpu_ticks $RPID); c0=$(script_calls)
  taskset -c 1 redis-benchmark -h 127.0.0.1 -p "$RPORT" -c "$CONNS" -n "$N_PEER" \
    "${rnd[@]}" -P 1 --csv EVALSHA "$TB" 1 "$key" $PEER_ARGS >"$f" 2>&1
  t1=$(cpu_ticks $RPID); c1=$(script_calls)
  report peer_redis_lua_token_bucket "$1" "$2" "$N_PEER" \
    "$(tail -1 "$f" | tr -d '"' | cut -d, -f2)" $((t1 - t0)) $((c1 - c0)) $((c1 - c0)) 0
}

MIXES="${MIXES:-hot abuse}"
for r in $(seq "$ROUNDS"); do
  for mix in $MIXES; do
    if [ $((r % 2)) = 1 ]; then
      run_sluice sluice_exact 0 "$mix" "$r"; run_sluice "$ON" 4194304 "$mix" "$r"
    else
      run_sluice "$ON" 4194304 "$mix" "$r"; run_sluice sluice_exact 0 "$mix" "$r"
    fi
    run_peer "$mix" "$r"
  done
done | tee "$OUT/summary.txt"

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
field() { grep "^$1 mix=$2 " "$OUT/summary.txt" | sed "s/.* $3=\([0-9.]*\).*/\1/" | median; }
echo "median of $ROUNDS, and the ratio to the peer's Redis CPU per decision:"
for mix in $MIXES; do
  peer=$(field peer_redis_lua_token_bucket "$mix" redis_cpu_us_per_decision)
  for name in sluice_exact "$ON" peer_redis_lua_token_bucket; do
    cpu=$(field "$name" "$mix" redis_cpu_us_per_decision)
    echo "$name mix=$mix rps=$(field "$name" "$mix" rps)" \
      "redis_cpu_us_per_decision=$cpu" \
      "redis_calls_per_decision=$(field "$name" "$mix" redis_calls_per_decision)" \
      "sent_per_decision=$(field "$name" "$mix" sent_per_decision)" \
      "refused_pct=$(field "$name" "$mix" refused_pct)" \
      "cpu_vs_peer=$(awk -v a="$cpu" -v b="$peer" 'BEGIN {printf "%.4f", (b > 0 ? a / b : 0)}')"
  done
done | tee -a "$OUT/summary.txt"
cat "$OUT/fallbacks.txt"
