#!/bin/bash
# test_replay.sh - the `sluice` command line: `sluice replay` answers small
# traces exactly as worked out by hand, rejects every kind of bad input with
# exit status 2 and a message naming the problem (and the line), skips blank
# lines and comments, and gets through ten million lines; `sluice demo`,
# `sluice version` and `sluice` alone behave.
#
# Needs SLUICE (the built binary).  SL_TEST_QUICK=1 (sanitizer builds)
# replays 200,000 lines instead of ten million; SL_REPLAY_LINES overrides.
set -euo pipefail
: "${SLUICE:?path of the built sluice binary}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS: $1"; }
fail() { failed=$((failed + 1)); echo "FAIL: $1"; }

# replay_ok NAME INPUT EXPECTED ARGS...: exit 0 and exactly EXPECTED.
replay_ok() {
  local name=$1 input=$2 expected=$3 rc=0
  shift 3
  printf '%b' "$input" | "$SLUICE" replay "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  printf '%b' "$expected" >"$tmp/expected"
  if [ "$rc" -ne 0 ]; then
    fail "$name: exit status $rc, expected 0; stderr: $(cat "$tmp/err")"
  elif ! cmp -s "$tmp/out" "$tmp/expected"; then
    fail "$name: output differs (expected, then actual):"
    diff "$tmp/expected" "$tmp/out" | sed 's/^/    /' || true
  else
    pass "$name"
  fi
}

# replay_bad NAME INPUT MESSAGE LINES ARGS...: exit 2, MESSAGE (a fixed
# string) on stderr, and LINES answers on stdout for the lines before.
replay_bad() {
  local name=$1 input=$2 message=$3 lines=$4 rc=0 got
  shift 4
  printf '%b' "$input" | "$SLUICE" replay "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  got=$(wc -l <"$tmp/out")
  if [ "$rc" -ne 2 ]; then
    fail "$name: exit status $rc, expected 2; stderr: $(cat "$tmp/err")"
  elif ! grep -qF -- "$message" "$tmp/err"; then
    fail "$name: stderr lacks \"$message\"; got: $(cat "$tmp/err")"
  elif [ "$got" -ne "$lines" ]; then
    fail "$name: $got lines answered before the error, expected $lines"
  else
    pass "$name"
  fi
}

tb=(--algorithm token_bucket --limit 2 --period 1s)

# ---- answers worked out by hand ----
# token_bucket 2 per second, burst 2: T = 500 ms per token.  Three at 0 s
# empty the bucket (the third may retry once a token is back, in 500 ms);
# b asks for 3 of a bucket of 2 (never); at 250 ms the bucket is 0.75 s
# behind, 250 ms short of a token; at 500 ms one token is back and taken;
# a cost-0 query consumes nothing.
replay_ok "token_bucket by hand" \
  '0 a\n0 a\n0 a\n0 b 3\n250000000 a\n500000000 a\n500000000 a 0\n' \
  '1 1 0 500000000 0\n1 0 0 1000000000 0\n0 0 500000000 1000000000 0\n0 2 -1 0 0\n0 0 250000000 750000000 0\n1 0 0 1000000000 0\n1 0 0 1000000000 0\n' \
  "${tb[@]}"

# leaky_bucket 1 per second, queue 2: the second request waits 1 s behind
# the first, the third finds the queue full (room again in 1 s); at 1.5 s
# half a unit is still queued, so the next waits 500 ms.
replay_ok "leaky_bucket by hand" \
  '0 x\n0 x\n0 x\n1500000000 x\n' \
  '1 1 0 1000000000 0\n1 0 0 2000000000 1000000000\n0 0 1000000000 2000000000 0\n1 0 0 1500000000 500000000\n' \
  --algorithm leaky_bucket --limit 1 --period 1s --burst 2

# fixed_window 3 per 10 s: 2 at 5 s, 2 more at 9 s do not fit (the window
# ends in 1 s), 2 at 10 s open the next window.  No newline at the end.
replay_ok "fixed_window by hand, last line without newline" \
  '5000000000 k 2\n9000000000 k 2\n10000000000 k 2' \
  '1 1 0 5000000000 0\n0 1 1000000000 1000000000 0\n1 1 0 10000000000 0\n' \
  --algorithm fixed_window --limit 3 --period 10s

# sliding_log 2 per minute (the design chapter's example): the attempt at
# 1:00:50 is refused; logged, it keeps the request at 1:01:40 limited to
# the one that fits; unlogged, both earlier ones have left by then.
replay_ok "sliding_log --log-rejected by hand" \
  '3601000000000 u\n3630000000000 u\n3650000000000 u\n3700000000000 u\n' \
  '1 1 0 60000000000 0\n1 0 0 60000000000 0\n0 0 40000000000 60000000000 0\n1 0 0 60000000000 0\n' \
  --algorithm sliding_log --limit 2 --period 1m --log-rejected
replay_ok "sliding_log without --log-rejected by hand" \
  '3601000000000 u\n3630000000000 u\n3650000000000 u\n3700000000000 u\n' \
  '1 1 0 60000000000 0\n1 0 0 60000000000 0\n0 0 11000000000 40000000000 0\n1 1 0 60000000000 0\n' \
  --algorithm sliding_log --limit 2 --period 1m

# stepped_window 10 per 4 s in 1 s steps: 6 + 2 + 2 fill it; at 3.5 s the
# next unit fits once step 1 (6 units) leaves the window at 5 s.
replay_ok "stepped_window --step by hand" \
  '1000000000 s 6\n2000000000 s 2\n3000000000 s 2\n3500000000 s 1\n' \
  '1 4 0 4000000000 0\n1 2 0 4000000000 0\n1 0 0 4000000000 0\n0 0 1500000000 3500000000 0\n' \
  --algorithm stepped_window --limit 10 --period 4s --step 1s

# Blank lines, whitespace-only lines, comments (also indented), tabs and
# CRLF line endings are all fine.
replay_ok "blank lines, comments, tabs, CRLF" \
  '# a trace\n\n   \n0 a\n  # indented comment\n#\n0\ta\r\n\t\n0 a 1\r\n' \
  '1 1 0 500000000 0\n1 0 0 1000000000 0\n0 0 500000000 1000000000 0\n' \
  "${tb[@]}"

replay_ok "empty input" '' '' "${tb[@]}"
replay_ok "only comments" '# nothing\n# here' '' "${tb[@]}"

# Durations with units are the same as plain nanoseconds.
for period in 1s 1000ms 1000000us 1000000000ns 1000000000; do
  replay_ok "period $period" \
    '0 a\n0 a\n' '1 1 0 500000000 0\n1 0 0 1000000000 0\n' \
    --algorithm token_bucket --limit 2 --period "$period"
done

# ---- bad input lines: exit 2, the line number, the bad field ----
replay_bad "non-numeric time" '0 a\nsoon a\n' \
  "line 2: invalid time: 'soon'" 1 "${tb[@]}"
replay_bad "negative time" '0 a\n\n-5 a\n' \
  "line 3: invalid time: '-5'" 1 "${tb[@]}"
replay_bad "time beyond int64" '99999999999999999999 a\n' \
  "line 1: invalid time: '99999999999999999999'" 0 "${tb[@]}"
replay_bad "fractional time" '1.5 a\n' \
  "line 1: invalid time: '1.5'" 0 "${tb[@]}"
replay_bad "non-numeric cost" '0 a\n0 a x\n' \
  "line 2: invalid cost: 'x'" 1 "${tb[@]}"
replay_bad "negative cost" '0 a -1\n' \
  "line 1: invalid cost: '-1'" 0 "${tb[@]}"
replay_bad "cost over 2^40" '0 a 1099511627777\n' \
  "line 1: invalid cost: '1099511627777'" 0 "${tb[@]}"
replay_bad "too many fields" '0 a\n0 a\n# c\n0 a 1 extra\n' \
  "line 4: expected 't_ns key [cost]', got 4 fields" 2 "${tb[@]}"
replay_bad "too few fields" '0 a\n0\n' \
  "line 2: expected 't_ns key [cost]', got 1 field" 1 "${tb[@]}"
replay_bad "bad line without newline at the end" '0 a\n0 a\nlate a' \
  "line 3: invalid time: 'late'" 2 "${tb[@]}"
key=$(head -c 4097 /dev/zero | tr '\0' k)
replay_bad "key over 4096 bytes" "0 a\n0 $key\n" \
  "line 2: key too long (4097 bytes)" 1 "${tb[@]}"
replay_ok "key of 4096 bytes" "0 ${key:1}\n" '1 1 0 500000000 0\n' "${tb[@]}"

# The latest time the library accepts is SL_MAX_TIME = 2^62 ns.
replay_ok "time 2^62" '4611686018427387904 a\n' '1 1 0 500000000 0\n' "${tb[@]}"
replay_bad "time over 2^62" '4611686018427387905 a\n' \
  "line 1: invalid time: '4611686018427387905'" 0 "${tb[@]}"

# Five or more fields: an error, but the message says 4.
replay_bad "five fields" '0 a 1 2 3\n' \
  "line 1: expected 't_ns key [cost]'" 0 "${tb[@]}"
replay_bad "five fields counted" '0 a 1 2 3\n' "got 5 fields" 0 "${tb[@]}"

# ---- bad options: exit 2 and the problem named ----
replay_bad "missing --algorithm" '' "missing --algorithm" 0 --limit 2 --period 1s
replay_bad "missing --limit" '' "missing --limit" 0 --algorithm gcra --period 1s
replay_bad "missing --period" '' "missing --period" 0 --algorithm gcra --limit 2
replay_bad "unknown algorithm" '' "invalid algorithm: 'leaky'" 0 \
  --algorithm leaky --limit 2 --period 1s
replay_bad "bad duration 5x" '' "invalid period: '5x'" 0 \
  --algorithm gcra --limit 2 --period 5x
replay_bad "bad step duration" '' "invalid step: '1q'" 0 \
  --algorithm stepped_window --limit 2 --period 1s --step 1q
replay_bad "step not dividing the period" '' "step must divide the period" 0 \
  --algorithm stepped_window --limit 2 --period 1s --step 300ms
replay_bad "step for another algorithm" '' "step applies only to stepped_window" 0 \
  --algorithm gcra --limit 2 --period 1s --step 100ms
replay_bad "non-numeric limit" '' "invalid limit: 'ten'" 0 \
  --algorithm gcra --limit ten --period 1s
replay_bad "limit 0" '' "limit out of range: '0'" 0 \
  --algorithm gcra --limit 0 --period 1s
replay_bad "period 0" '' "period out of range" 0 \
  --algorithm gcra --limit 1 --period 0
replay_bad "burst for a window" '' "burst applies only to" 0 \
  --algorithm fixed_window --limit 2 --burst 5 --period 1s
replay_bad "log-rejected for a bucket" '' "flags not valid for token_bucket" 0 \
  --algorithm token_bucket --limit 2 --period 1s --log-rejected
replay_bad "memory 0" '' "invalid memory: '0'" 0 \
  --algorithm gcra --limit 2 --period 1s --memory 0
replay_bad "unknown option" '' "unknown or incomplete option: '--rate'" 0 \
  --algorithm gcra --limit 2 --period 1s --rate 5
replay_bad "option without its value" '' "unknown or incomplete option" 0 \
  --algorithm gcra --limit 2 --period
replay_bad "stray argument" '' "unexpected argument: 'extra'" 0 \
  --algorithm gcra --limit 2 --period 1s extra

# --help prints the usage and exits 0.
if "$SLUICE" replay --help >"$tmp/out" 2>&1 && grep -q '^usage: sluice replay' "$tmp/out"; then
  pass "replay --help"
else
  fail "replay --help: $(cat "$tmp/out")"
fi

# ---- ten million lines ----
# Key k<i % 1000> at t = 100 i ns: each key is asked every 100 us, ten
# times per 1 ms window of fixed_window 5 per ms, so exactly half pass
# (n a multiple of 10,000 keeps every key's windows whole).
lines=${SL_REPLAY_LINES:-10000000}
if [ -n "${SL_TEST_QUICK:-}" ] && [ "${SL_TEST_QUICK}" != 0 ] && [ -z "${SL_REPLAY_LINES:-}" ]; then
  lines=200000
fi
# awk prints i followed by "00" rather than computing 100 i: mawk's
# printf %d stops at 2^31.
awk -v n="$lines" 'BEGIN { for (i = 0; i < n; i++) print i "00", "k" (i % 1000) }' \
  >"$tmp/big.trace"
start=$(date +%s%N)
rc=0
"$SLUICE" replay --algorithm fixed_window --limit 5 --period 1ms \
  <"$tmp/big.trace" >"$tmp/big.out" 2>"$tmp/err" || rc=$?
end=$(date +%s%N)
ms=$(((end - start) / 1000000))
out_lines=$(wc -l <"$tmp/big.out")
allowed=$(grep -c '^1 ' "$tmp/big.out" || true)
echo "INFO: replayed $lines lines in $ms ms ($(awk -v n="$lines" -v ms="$ms" \
  'BEGIN { if (ms > 0) printf "%.1f", n / ms / 1000; else print "inf" }') M lines/s)"
if [ "$rc" -ne 0 ]; then
  fail "$lines lines: exit status $rc: $(head -c 500 "$tmp/err")"
elif [ "$out_lines" -ne "$lines" ]; then
  fail "$lines lines: $out_lines output lines, expected $lines"
elif [ "$allowed" -ne $((lines / 2)) ]; then
  fail "$lines lines: $allowed allowed, expected $((lines / 2))"
else
  pass "$lines lines: one answer each, $allowed allowed"
fi
rm -f "$tmp/big.trace" "$tmp/big.out"

# ---- the other commands ----
if "$SLUICE" demo >"$tmp/out" 2>"$tmp/err"; then
  missing=""
  for title in "token bucket" "gcra" "leaky bucket" "fixed window" \
    "sliding log" "sliding window" "stepped window"; do
    grep -q "^$title: " "$tmp/out" || missing="$missing '$title'"
  done
  if [ -z "$missing" ]; then
    pass "demo: exit 0, every algorithm's title"
  else
    fail "demo: no title for$missing"
  fi
else
  fail "demo: exit status $?: $(cat "$tmp/err")"
fi

rc=0
"$SLUICE" >"$tmp/out" 2>"$tmp/err" || rc=$?
if [ "$rc" -eq 2 ] && grep -q '^usage: sluice' "$tmp/err"; then
  pass "no arguments: exit 2 and the usage"
else
  fail "no arguments: exit status $rc, stderr: $(cat "$tmp/err")"
fi

rc=0
"$SLUICE" frobnicate >"$tmp/out" 2>"$tmp/err" || rc=$?
if [ "$rc" -eq 2 ] && grep -qF "unknown command: 'frobnicate'" "$tmp/err"; then
  pass "unknown command: exit 2"
else
  fail "unknown command: exit status $rc, stderr: $(cat "$tmp/err")"
fi

version=$("$SLUICE" version)
if [ "$version" = "sluice 0.1.0" ] || [[ "$version" =~ ^sluice\ [0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  pass "version: '$version'"
else
  fail "version printed '$version'"
fi
if [ -n "${SOURCE_DIR:-}" ] && [ -f "$SOURCE_DIR/include/sluice.h" ]; then
  header=$(sed -n 's/^#define SL_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
    "$SOURCE_DIR/include/sluice.h" | paste -sd.)
  if [ "$version" = "sluice $header" ]; then
    pass "version matches sluice.h's SL_VERSION_* ($header)"
  else
    fail "version '$version' but sluice.h says '$header'"
  fi
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
