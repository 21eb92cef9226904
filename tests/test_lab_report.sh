#!/bin/bash
# test_lab_report.sh - the lab's report writer against a golden copy:
# from a fixed results.json and samples.csv (tests/lab/golden/, the
# output of a `sluice lab run --profile smoke`), `sluice lab report`
# must write report.md, report.html and every plot byte for byte as in
# tests/lab/golden/expected/.  A change to the report that is meant
# updates the golden copy:
#   sluice lab report --out DIR (a copy of tests/lab/golden's inputs),
#   then copy DIR/report.* and DIR/plots/ into tests/lab/golden/expected/.
set -uo pipefail
: "${SLUICE:?path of the sluice binary}" "${SOURCE_DIR:?repository root}"
. "$SOURCE_DIR/tests/sh/common.sh"

golden=$SOURCE_DIR/tests/lab/golden
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for run in 1 2; do
  rm -rf "$tmp/out" && mkdir "$tmp/out"
  cp "$golden/results.json" "$golden/samples.csv" "$tmp/out/"
  if ! "$SLUICE" lab report --out "$tmp/out" 2>"$tmp/err"; then
    bad "report run $run" "$(cat "$tmp/err")"
    continue
  fi
  (cd "$golden/expected" && find . -type f | sort) >"$tmp/want"
  (cd "$tmp/out" && find . -type f ! -name results.json ! -name samples.csv | sort) >"$tmp/got"
  if ! cmp -s "$tmp/want" "$tmp/got"; then
    bad "run $run: the files written" "$(diff "$tmp/want" "$tmp/got")"
  fi
  while read -r f; do
    if cmp -s "$golden/expected/$f" "$tmp/out/$f"; then :; else
      bad "run $run: $f" "differs from the golden copy: $(diff "$golden/expected/$f" "$tmp/out/$f" | head -5)"
    fi
  done <"$tmp/want"
done
[ "$fail" = 0 ] && pass "report.md, report.html and $(grep -c svg "$tmp/want") plots as the golden copy, twice"

# Bad input: a message naming the file, exit 1.
mkdir -p "$tmp/empty"
rc=0
"$SLUICE" lab report --out "$tmp/empty" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -q "results.json" "$tmp/err" && pass "no results.json: exit 1, named" ||
  bad "no results.json" "exit $rc: $(cat "$tmp/err")"
printf '{"cells": [' >"$tmp/empty/results.json"
rc=0
"$SLUICE" lab report --out "$tmp/empty" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -q "results.json:1" "$tmp/err" && pass "broken results.json: exit 1, line named" ||
  bad "broken results.json" "exit $rc: $(cat "$tmp/err")"
cp "$golden/results.json" "$tmp/empty/"
printf 'scenario,t\ns1,0\n' >"$tmp/empty/samples.csv"
rc=0
"$SLUICE" lab report --out "$tmp/empty" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -q "samples.csv" "$tmp/err" && pass "samples.csv without its columns: exit 1" ||
  bad "bad samples.csv" "exit $rc: $(cat "$tmp/err")"
exit $fail
