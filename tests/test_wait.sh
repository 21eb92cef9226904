#!/bin/bash
# test_wait.sh - `sluice wait` against a running sluice serve: a shell
# loop calling through it never exceeds the limit (a limit of 2 an hour
# lets 2 of 5 calls run, the others give up past --max-wait with status 3
# and record nothing); a call that must wait is run after the wait (a
# token bucket of 1 a second: the second call waits, then runs); six
# concurrent loops on one limit of 4 run exactly 4 calls between them;
# the command's exit status is wait's; rules named by descriptor and by
# name; bad limits answered with the server's message and status 1.
#
# Needs SLUICE (the built binary) and SOURCE_DIR.
set -euo pipefail
: "${SLUICE:?path of the built sluice binary}"
: "${SOURCE_DIR:?the source tree}"
. "$SOURCE_DIR/tests/sh/common.sh"

tmp=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

port=$(free_port)
"$SLUICE" serve --rules "$SOURCE_DIR/examples/rules" --listen 127.0.0.1:"$port" 2>"$tmp/serve.log" &
pid=$!
wait_port "$port"
export SLUICE_SERVER="http://127.0.0.1:$port"
# A fresh ad hoc limit per case (its id), so the cases never share one.
hourly() { "$SLUICE" wait --id "$1" --interval 1h --requests "$2" "${@:3}"; }

# A loop of 5 through a limit of 2 an hour: 2 run, 3 give up.
ran=0 gave_up=0
for i in 1 2 3 4 5; do
  rc=0
  hourly loop 2 --max-wait 2s -- sh -c "echo $i >>'$tmp/loop'" 2>>"$tmp/loop.err" || rc=$?
  [ "$rc" = 0 ] && ran=$((ran + 1))
  [ "$rc" = 3 ] && gave_up=$((gave_up + 1))
done
remaining=$(curl -s "$SLUICE_SERVER/v1/delay?id=loop&interval=1h&requests=2" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["remaining"])')
[ "$ran" = 2 ] && [ "$gave_up" = 3 ] && [ "$(cat "$tmp/loop")" = "$(printf '1\n2')" ] &&
  grep -q 'past --max-wait' "$tmp/loop.err" && [ "$remaining" = 0 ] &&
  pass "a loop of 5 through 2 an hour: 2 run, 3 give up (status 3)" ||
  bad "loop" "ran $ran, gave up $gave_up, remaining $remaining: $(cat "$tmp/loop.err")"

# A token bucket of 1 a second, burst 1: the second call waits for the
# bucket, then runs; the record of the first is why.
for i in 1 2; do
  "$SLUICE" wait --id bucket --interval 1s --requests 1 --algorithm token_bucket \
    --verbose -- sh -c "echo run $i >>'$tmp/bucket'" 2>>"$tmp/bucket.err"
done
[ "$(cat "$tmp/bucket")" = "$(printf 'run 1\nrun 2')" ] && grep -q '^sluice wait: waiting [0-9]* ms$' "$tmp/bucket.err" &&
  pass "a call over the rate waits, then runs" || bad "bucket" "$(cat "$tmp/bucket" "$tmp/bucket.err")"

# Six loops at once, three calls each, on one limit of 4 an hour: the
# record comes first and a raced one is not run, so exactly 4 run.
for j in 1 2 3 4 5 6; do
  (for i in 1 2 3; do
    hourly race 4 --max-wait 0 -- sh -c "echo $j.$i >>'$tmp/race'" 2>/dev/null || true
  done) &
  racers+=($!)
done
wait "${racers[@]}"
[ "$(wc -l <"$tmp/race")" = 4 ] &&
  pass "six concurrent loops on a limit of 4: exactly 4 calls run" ||
  bad "race" "$(wc -l <"$tmp/race") ran"

# The command's status is wait's; without a command, 0 once recorded.
rc=0; hourly status 5 -- sh -c 'exit 7' || rc=$?
rc2=0; hourly status 5 || rc2=$?
rc3=0; hourly status 5 -- /nonexistent/cmd 2>/dev/null || rc3=$?
[ "$rc" = 7 ] && [ "$rc2" = 0 ] && [ "$rc3" = 127 ] &&
  pass "exit status: the command's (7), 0 without one, 127 for no such command" ||
  bad "status" "$rc $rc2 $rc3"

# Rules by descriptor and by name (examples/rules).
out=$("$SLUICE" wait --domain api --entry tenant=acme --entry user=42 -- echo ran 2>&1)
out2=$("$SLUICE" wait --id user_hourly -- echo ran 2>&1)
[ "$out" = ran ] && [ "$out2" = ran ] && pass "a rule by descriptor and by name" ||
  bad "rules" "$out / $out2"

# Errors: the server's message, status 1; usage, status 2.
rc=0; out=$("$SLUICE" wait --id x --interval 1fortnight --requests 3 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q '400 interval: expected a positive duration' <<<"$out" &&
  pass "a bad interval: 1, the server's message" || bad "bad interval" "$rc $out"
rc=0; out=$("$SLUICE" wait --domain api --entry nope=1 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q '404' <<<"$out" && pass "no rule matches: 1, 404" || bad "no rule" "$rc $out"
rc=0; "$SLUICE" wait -- true 2>/dev/null || rc=$?
rc2=0; "$SLUICE" wait --id a --entry novalue 2>/dev/null || rc2=$?
[ "$rc" = 2 ] && [ "$rc2" = 2 ] && pass "no limit, a bad --entry: usage (2)" || bad "usage" "$rc $rc2"
rc=0; out=$("$SLUICE" wait --server http://127.0.0.1:1 --id a 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q 'connect' <<<"$out" && pass "sluice unreachable: 1" || bad "unreachable" "$rc $out"

exit $fail
