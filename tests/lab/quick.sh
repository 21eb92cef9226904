#!/bin/bash
# tests/lab/quick.sh - the lab's quick profile as a test (`ctest -L lab`,
# about 7 minutes; scripts/test.sh leaves it out with -LE lab): every
# scenario with token_bucket, static variant, and the run's exit status
# is the verdict of its acceptance checks (docs/lab.md, "Acceptance").
# SL_LAB_ALGORITHMS widens it (fixed_window,sliding_window,token_bucket).
set -uo pipefail
: "${SLUICE:?path of the sluice binary}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$SLUICE" lab run --profile quick --seed 1 \
  --algorithms "${SL_LAB_ALGORITHMS:-token_bucket}" --out "$out/run"
