#!/bin/bash
# A real closed loop of the adaptive controller in `sluice proxy` with an
# upstream that turns 3x slower (docs/adaptive.md, "A slower upstream"):
# 4 workers of 25 ms, at most 80 waiting and 503 past them
# (tests/proxy/adaptive_upstream.py), behind a token bucket of 300/s
# (burst 30) with `adaptive: {min: 40, max: 600, controller: gradient,
# slo_p99: 150ms}`, under 250 r/s (tests/proxy/adaptive_load.py).  After
# 20 s of plain overload the upstream's service takes 75 ms (about 53 r/s)
# for 30 s, then 25 ms again for 20 s; then the clients stop for 20 s
# (idle), and send a steady 120 r/s for 20 s.  Judged by its effect, from
# the upstream's own log and with generous bounds (the machine is
# shared): in the last 10 s of the slow phase it sheds little and its p99
# is far from a full queue's (80 waiting: 1.5 s); the limit is near its
# capacity; once healed the limit climbs back well above the minimum;
# idle, it is back at the rule's 300 (relax_after: 10s, then steps of at
# most 25%); steady, below the capacity, nothing is shed and the limit
# holds at 300.  The controller's trace (--adaptive-trace) gives the
# limit's whole path: no window raises it by more than 25% (raise_max).
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
source "$SOURCE_DIR/tests/sh/common.sh"
source "$SOURCE_DIR/tests/sh/adaptive.sh"

adaptive_rules 300 "{min: 40, max: 600, controller: gradient, slo_p99: 150ms, relax_after: 10s}" \
  "algorithm: token_bucket" "burst: 30"
head -c 32 /dev/urandom | base64 | tr -d '/+=\n' >"$tmp/token"

UP=$(free_port)
python3 "$SOURCE_DIR/tests/proxy/adaptive_upstream.py" "$UP" "$tmp/upstream.log" &
pids+=($!)
wait_port "$UP"
for c in capacity/4 delay/25 queue/80; do
  curl -s "http://127.0.0.1:$UP/__$c" >/dev/null
done
start_proxy proxy --config "$tmp/proxy.yaml" --rules "$tmp/rules.yaml" \
  --upstream "http://127.0.0.1:$UP" --threads 2 --admin-listen 127.0.0.1:0 \
  --admin-token-file "$tmp/token" --adaptive-trace "$tmp/trace"
P=$PORT A=$ADMIN
python3 "$SOURCE_DIR/tests/proxy/adaptive_load.py" "$P" /x 250 "$tmp/stop" 64 &
pids+=($!)
now() { python3 -c 'import time; print(time.monotonic())'; }

sleep 20
slow=$(now)
curl -s "http://127.0.0.1:$UP/__delay/75" >/dev/null
sleep 30
healed=$(now)
read -r L_SLOW S_SLOW < <(limit "$A")
curl -s "http://127.0.0.1:$UP/__delay/25" >/dev/null
sleep 20
read -r L_HEALED S_HEALED < <(limit "$A")
end=$(now)
touch "$tmp/stop"
sleep 20
read -r L_IDLE S_IDLE < <(limit "$A")
steady=$(now)
python3 "$SOURCE_DIR/tests/proxy/adaptive_load.py" "$P" /x 120 "$tmp/stop2" 32 &
pids+=($!)
sleep 20
read -r L_STEADY S_STEADY < <(limit "$A")
steady_end=$(now)
touch "$tmp/stop2"

# window FROM TO: "answers shed p99_ms rate" of the upstream's log in it.
window() {
  python3 - "$tmp/upstream.log" "$1" "$2" <<'PY'
import math, sys
lo, hi = float(sys.argv[2]), float(sys.argv[3])
ok, shed = [], 0
for line in open(sys.argv[1]):
    t, status, ms = line.split()
    if lo <= float(t) < hi:
        if status == "503":
            shed += 1
        else:
            ok.append(float(ms))
ok.sort()
p99 = ok[max(0, math.ceil(0.99 * len(ok)) - 1)] if ok else 0
print(len(ok) + shed, shed, round(p99), round(len(ok) / (hi - lo)))
PY
}
read -r n_slow shed_slow p99_slow rate_slow < <(window "$(python3 -c "print($slow + 20)")" "$healed")
read -r n_heal shed_heal p99_heal rate_heal < <(window "$(python3 -c "print($healed + 10)")" "$end")
read -r n_all shed_all p99_all _ < <(window "$slow" "$healed")
read -r n_st shed_st p99_st rate_st < <(window "$(python3 -c "print($steady + 5)")" "$steady_end")
echo "slower, all 30 s: $n_all answers, $shed_all shed, p99 ${p99_all} ms"
echo "slower, last 10 s: $n_slow answers, $shed_slow shed, p99 ${p99_slow} ms, $rate_slow/s served; limit $L_SLOW"
echo "healed, last 10 s: $n_heal answers, $shed_heal shed, p99 ${p99_heal} ms, $rate_heal/s served; limit $L_HEALED"

if [ "$n_slow" -gt 100 ] && [ "$shed_slow" -le $((n_slow / 20)) ] && [ "$p99_slow" -le 1000 ]; then
  pass "slower: the upstream protected (shed $shed_slow of $n_slow, p99 $p99_slow ms)"
else bad "slower" "shed $shed_slow of $n_slow, p99 $p99_slow ms"; fi
if [ "${L_SLOW:-999}" -le 80 ]; then
  pass "slower: the limit near its capacity of 53/s ($L_SLOW)"
else bad "slower limit" "$L_SLOW $S_SLOW"; fi
if [ "${L_HEALED:-0}" -ge 80 ] && [ "$rate_heal" -ge 60 ]; then
  pass "healed: the limit back up ($L_HEALED, $rate_heal/s served)"
else bad "healed" "limit $L_HEALED $S_HEALED, $rate_heal/s served"; fi
echo "idle 20 s: limit $L_IDLE $S_IDLE; steady 120/s, last 15 s: $n_st answers, $shed_st shed, p99 ${p99_st} ms, $rate_st/s served; limit $L_STEADY"
if [ "${L_IDLE:-0}" -eq 300 ]; then
  pass "idle: the limit back at the rule's 300"
else bad "idle" "limit $L_IDLE $S_IDLE"; fi
if [ "$shed_st" -eq 0 ] && [ "$rate_st" -ge 100 ] && [ "${L_STEADY:-0}" -eq 300 ]; then
  pass "steady 120/s: nothing shed, $rate_st/s served, the limit held at 300"
else bad "steady" "shed $shed_st, $rate_st/s served, p99 $p99_st ms, limit $L_STEADY $S_STEADY"; fi
# The trace's windows: "id<TAB>signal<TAB>limit action reason capacity".
if steps=$(python3 - "$tmp/trace" <<'PY'
import math, sys
last, n, worst = None, 0, 0.0
for line in open(sys.argv[1]):
    limit = int(line.split("\t")[2].split()[0])
    if last is not None:
        n += 1
        worst = max(worst, limit / last)
        if limit > math.ceil(1.25 * last):
            print(f"window {n}: {last} -> {limit}")
            sys.exit(1)
    last = limit
print(f"{n} windows, the largest step x{worst:.3f}")
PY
); then
  pass "the limit's path: no window raised it by more than 25% ($steps)"
else bad "the limit's path" "$steps"; fi
stop_clean proxy "$PXPID"
exit $fail
