#!/bin/bash
# tests/lab/quick.sh - the lab's quick profile as a test (`ctest -L lab`,
# about 17 minutes; scripts/test.sh leaves it out with -LE lab): every
# scenario with token_bucket, the static variant, and the adaptive and
# advisor variants on the scenarios where they differ (docs/lab.md); the
# run's exit status is the verdict of its acceptance checks (docs/lab.md,
# "Acceptance"), and the checks issue 16 asks for must be among them.
# SL_LAB_ALGORITHMS widens it (fixed_window,sliding_window,token_bucket).
set -uo pipefail
: "${SLUICE:?path of the sluice binary}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
rc=0
"$SLUICE" lab run --profile quick --seed 1 --variants static,adaptive,advisor \
  --algorithms "${SL_LAB_ALGORITHMS:-token_bucket}" --out "$out/run" || rc=$?
# A check missing is a failure too: the run passes only what it checks.
python3 - "$out/run/results.json" <<'PY' || rc=1
import json, sys
checks = json.load(open(sys.argv[1]))["checks"]
have = {(c["cell"], c["phase"], c["check"]): c for c in checks}
want = [
    ("s1/token_bucket/adaptive", "steady", "limit reversals/min"),
    ("s1/token_bucket/adaptive", "steady", "limit CV"),
    ("s2/token_bucket/static", "burst", "protection %"),
    ("s2/token_bucket/adaptive", "burst", "protection %"),
    ("s2/token_bucket/advisor", "burst", "protection %"),
    ("s2/token_bucket/adaptive", "burst", "B p99 ms"),
    ("s2/token_bucket/adaptive", "burst", "% 429 legit < static's"),
    ("s2/token_bucket/advisor", "burst", "% 429 legit < static's"),
    ("s3/token_bucket/static", "abuse", "S_L %"),
    ("s4/token_bucket/adaptive", "redis_paused", "protection %"),
    ("s4/token_bucket/adaptive", "redis_stopped", "protection %"),
    ("s4/token_bucket/adaptive", "after_pause", "decisions resume s"),
    ("s4/token_bucket/adaptive", "b_degraded", "protection %"),
]
ok = True
for w in want:
    c = have.get(w)
    if c is None or c["verdict"] not in ("PASS", "FAIL"):
        print("FAIL check missing or not asserted: %s" % (w,))
        ok = False
if have.get(("s3/token_bucket/static", "abuse", "S_L %"), {}).get("threshold") != 99:
    print("FAIL s3's legitimate success is asserted at 99%")
    ok = False
sys.exit(0 if ok else 1)
PY
exit $rc
