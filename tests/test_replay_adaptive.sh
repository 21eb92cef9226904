#!/bin/bash
# test_replay_adaptive.sh - `sluice replay --adaptive`: the adaptive
# controller over recorded signal traces gives the limits worked out by
# hand from docs/adaptive.md's rules (warm-up, a gradient decrease, an SLO
# decrease, increases while binding, relax when idle), the same limits on
# every run, and exit status 2 with the line named for bad input.
#
# Needs SLUICE (the built binary).
set -euo pipefail
: "${SLUICE:?path of the built sluice binary}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS: $1"; }
fail() { failed=$((failed + 1)); echo "FAIL: $1"; }

flags=(--adaptive --base 100 --min 25 --max 250 --slo-p99 300ms)
# ten healthy windows at 40 ms, 80 per second let through: the baseline.
warm=$(for _ in $(seq 10); do echo "100 40 120 0 80 0"; done)

# expect NAME INPUT WANT [FLAGS...]: the last line of the output is WANT.
expect() {
  local got
  got=$(printf '%s\n' "$2" | "$SLUICE" replay "${flags[@]}" "${@:4}" | tail -1)
  if [ "$got" = "$3" ]; then pass "$1: $got"; else fail "$1: got '$got', want '$3'"; fi
}

expect "warm-up holds the rule's number" "$warm" "100 hold 0 0 1.0000 none 0"
# the median doubles while a queue builds (60 of the 80 answered, the
# 8th field): g = 1.25 * 40 / 80 = 0.625 of min(100, 80) = 50, under
# 90% of the goodput (the 60 answers) less the 20 queued over 5 s, 50;
# the capacity shown is the 60 answered.
expect "a doubled median, a queue building: 0.625 of the accepted rate" \
  "$warm"$'\n'"100 80 240 0 80 0 0 60" "50 decrease 1 1 0.6250 latency 60"
# every request answered (no 8th field: as many as went): no deeper than
# 90% of them, 72.
expect "a doubled median, no queue: 90% of the answers" \
  "$warm"$'\n'"100 80 240 0 80 0" "72 decrease 1 1 0.6250 latency 0"
# 25% over the baseline is within the buffer.
expect "a median 20% up is no overload" "$warm"$'\n'"100 48 144 0 80 0" \
  "100 hold 0 0 1.0000 none 0"
# p99 past the 300 ms SLO with a calm median and no queue: the
# upstream's own speed, no cut.  With a queue building (70 of 80
# answered): 0.9 of min(100, 80) = 72, under 90% of the goodput (63) less
# the 10 queued over 5 s, 61; a third past it (400 ms), by 300/400: 60.
expect "an SLO breach, no queue: no cut" "$warm"$'\n'"100 40 330 0 80 0" \
  "100 hold 0 0 1.0000 none 0"
expect "an SLO breach, a queue: to 90% of the goodput" \
  "$warm"$'\n'"100 40 330 0 80 0 0 70" "61 decrease 1 1 0.9000 slo 70"
expect "an SLO breach cuts by how far past" \
  "$warm"$'\n'"100 40 400 0 80 0 0 70" "60 decrease 1 1 0.7500 slo 70"
# 3 failures in 100 answers: over 2%.
expect "3% failures cut by 10%" "$warm"$'\n'"100 40 120 3 80 0" \
  "72 decrease 1 1 0.9000 errors 0"
# 19 answers: too few to judge, however slow.
expect "19 answers judge nothing" "$warm"$'\n'"19 900 900 19 19 0" \
  "100 hold 0 0 1.0000 none 0"
# binding (20 refused of 120) after three calm windows (the warm-up's):
# +5% of the limit (at least of the rule's number) a window, 100 -> 105
# -> 110.25 -> 115.76.
bind=$(for _ in $(seq 3); do echo "100 40 120 0 100 20"; done)
expect "binding and calm: +5% a window" "$warm"$'\n'"$bind" \
  "116 increase 1 0 1.0000 recover 0"
expect "not after a cut until 5 windows have passed" \
  "$warm"$'\n'"100 40 120 3 80 0"$'\n'"$(for _ in $(seq 4); do echo "100 40 120 0 72 20"; done)" \
  "72 hold 0 0 1.0000 none 0"
# the in-force limit (several nodes: the minimum of their proposals) is
# where a step starts: 60 + 5% of the rule's number, 5 (as much as a
# quarter of the 80 - 60 it refuses) = 65.
expect "a step starts from the limit in force" \
  "$warm"$'\n'"$bind"$'\n'"100 40 120 0 60 20 60" \
  "65 increase 1 0 1.0000 recover 0"
# binding and calm from the start, but the baseline not warm (5 of 10
# judged windows): no increase yet.
cold=$(for _ in $(seq 5); do echo "100 5 10 0 100 60"; done)
expect "no increase before the baseline is warm" "$cold" \
  "100 hold 0 0 1.0000 none 0"
# demand of twice the limit, no overload seen: a quarter of the refused
# demand a window, 100 -> 125 -> 143.75 -> 157.81.
surge=$(echo "100 40 120 0 100 100"; echo "100 40 120 0 125 75"; echo "100 40 120 0 144 56")
expect "a surge on a healthy upstream: a quarter of the gap a window" \
  "$warm"$'\n'"$surge" "158 increase 1 0 1.0000 surge 0"
# after a cut, 30 idle windows (10 per second against 72) relax toward
# 100, 25% a window at most: 90, then 100.
idle=$(for _ in $(seq 30); do echo "25 40 120 0 10 0"; done)
expect "idle for 30 windows relaxes toward the rule's number" \
  "$warm"$'\n'"100 80 240 0 80 0"$'\n'"$idle" "90 relax 1 0 1.0000 idle 0"
expect "and reaches it the window after" \
  "$warm"$'\n'"100 80 240 0 80 0"$'\n'"$idle"$'\n'"25 40 120 0 10 0" \
  "100 relax 1 0 1.0000 idle 0"
expect "relax_after sets how long" "$warm"$'\n'"100 80 240 0 80 0"$'\n'"$(
  for _ in $(seq 10); do echo "25 40 120 0 10 0"; done)" \
  "90 relax 1 0 1.0000 idle 0" --relax-after 10s
idle29=$(for _ in $(seq 29); do echo "25 40 120 0 10 0"; done)
expect "not after 29" "$warm"$'\n'"100 80 240 0 80 0"$'\n'"$idle29" \
  "72 hold 0 0 1.0000 none 0"

# The same trace, the same limits: a long mixed trace twice.
for i in $(seq 600); do
  case $((i % 90)) in
    [0-9]) echo "150 120 300 1 140 60" ;;
    *) echo "150 40 120 0 140 $((i % 7 * 5))" ;;
  esac
done >"$tmp/mixed"
"$SLUICE" replay "${flags[@]}" --season 90s <"$tmp/mixed" >"$tmp/a"
"$SLUICE" replay "${flags[@]}" --season 90s <"$tmp/mixed" >"$tmp/b"
if cmp -s "$tmp/a" "$tmp/b" && [ "$(wc -l <"$tmp/a")" -eq 600 ]; then
  pass "600 windows replay to the same 600 limits twice"
else
  fail "replays differ or lines are missing"
fi
if awk '$1 < 25 || $1 > 250 { bad = 1 } END { exit bad }' "$tmp/a"; then
  pass "every limit within [min, max]"
else
  fail "a limit outside [25, 250]"
fi

# Regression traces (tests/adaptive/), one per fault, from the closed
# loop of test_controller_slower.c: each replays to exactly the limits
# recorded beside it, and those limits do what the fault asks.
dir=${SOURCE_DIR:-$(dirname "$0")/..}/tests/adaptive
loop=(--adaptive --base 300 --min 40 --max 600 --slo-p99 150ms)
for t in slower_upstream recovery idle_return; do
  "$SLUICE" replay "${loop[@]}" <"$dir/$t.trace" >"$tmp/$t"
  if cmp -s "$tmp/$t" "$dir/$t.limits"; then
    pass "$t.trace replays to its limits"
  else
    fail "$t.trace: $(diff "$dir/$t.limits" "$tmp/$t" | head -3)"
  fi
done
# slower from window 41 (capacity 53/s): from window 50 the limit is at
# most 10% past it and under it on average.
if awk 'NR >= 50 { s += $1; n++; if ($1 > 58) bad = 1 } END { exit bad || s / n > 53.3 }' \
  "$dir/slower_upstream.limits"; then
  pass "slower upstream: the limit at its capacity from 9 s after"
else
  fail "slower upstream: the limit past its capacity"
fi
# no window raises the limit by more than 25% (rounded), in any trace.
if awk 'FNR > 1 && $1 > int(1.25 * last + 0.5) { bad = 1 } { last = $1 } END { exit bad }' \
  "$dir"/*.limits; then
  pass "no raise past 25% a window"
else
  fail "a raise past 25% a window"
fi
# healed from window 71: over 100 by window 85, never at min after 75.
if awk 'NR >= 75 && $1 <= 40 { bad = 1 } NR >= 85 && $1 < 100 { bad = 1 } END { exit bad }' \
  "$dir/recovery.limits"; then
  pass "recovery: no minimum-hugging"
else
  fail "recovery: the limit stayed low"
fi
# idle from window 101 (30 r/s, healthy): at the rule's number by 140.
if awk 'NR >= 140 && $1 != 300 { bad = 1 } END { exit bad }' "$dir/idle_return.limits"; then
  pass "idle: back at the rule's number within 40 windows"
else
  fail "idle: not back at the rule's number"
fi

# bad_input NAME WANT-IN-STDERR INPUT ARGS...: exit 2 and the message.
bad_input() {
  local name=$1 want=$2 input=$3 rc=0
  shift 3
  printf '%s\n' "$input" | "$SLUICE" replay "$@" >/dev/null 2>"$tmp/err" || rc=$?
  if [ "$rc" -eq 2 ] && grep -qF -- "$want" "$tmp/err"; then
    pass "$name"
  else
    fail "$name: exit $rc, stderr: $(cat "$tmp/err")"
  fi
}
bad_input "five fields" "line 2: expected 'n s50_ms" $'# c\n1 2 3 4 5' "${flags[@]}"
bad_input "a negative field" "line 1: field 4 is not a non-negative number" \
  "1 2 3 -4 5 6" "${flags[@]}"
bad_input "a word" "line 1: expected" "1 2 x 4 5 6" "${flags[@]}"
bad_input "twelve fields" "line 1: expected" "1 2 3 4 5 6 7 8 9 10 11 12" "${flags[@]}"
bad_input "no --base" "usage: sluice replay --adaptive" "" --adaptive --min 1 --max 2
bad_input "min above max" "min must be at most max" "" --adaptive --base 5 --min 9 --max 2
bad_input "a bad duration" "invalid slo-p99: 'soon'" "" --adaptive --base 5 --min 1 --max 9 --slo-p99 soon
bad_input "a season under 2s" "invalid season" "" --adaptive --base 5 --min 1 --max 9 --season 1s
bad_input "a raise step without %" "invalid raise-step (0.1% to 50%): '5'" "" \
  --adaptive --base 5 --min 1 --max 9 --raise-step 5
bad_input "a capacity share under 50%" "invalid capacity-share" "" \
  --adaptive --base 5 --min 1 --max 9 --capacity-share 40%
bad_input "relax-after not in whole seconds" "invalid relax-after" "" \
  --adaptive --base 5 --min 1 --max 9 --relax-after 1500ms

echo "test_replay_adaptive: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
