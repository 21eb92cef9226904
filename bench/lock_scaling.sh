#!/bin/bash
# bench/lock_scaling.sh - two threads on one hot key against one thread,
# with the shard lock's waiting as it is and as the eighth session left it,
# side by side in one run.
#
#   ROUNDS=10 [KEYS=1] bench/lock_scaling.sh
#
# Builds bench_decide twice from this tree (RelWithDebInfo, as bench/run.sh):
# as it is ("now"), and with sl__spin_wait (src/store/spinlock.c) replaced by
# the eighth session's back-off, which started every wait at one pause,
# doubled to 64 between looks and yielded on every look after 1,024 pauses
# ("eighth").  Then, ROUNDS times (default 10), one after the other, each
# runs `bench_decide -k KEYS -t 2 -s` (KEYS default 1, the hot key; 1000000
# for random keys): 15 pairs of one rep on one thread (on CPU 0 and CPU 1
# in turn) and one rep on two (CPUs 0 and 1), a moment apart, so both of a
# pair see the machine at the same speed; its speedup_median is the median
# of the pairs' one-thread ns over two-thread ns.  Prints one JSON line per
# run and, per build, the median over rounds of speedup_median and of
# lock_waits per million two-thread decisions (decisions that found the
# shard locked and waited).
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
source "$ROOT/bench/lib.sh" # build_bench_decide
ROUNDS="${ROUNDS:-10}"
KEYS="${KEYS:-1}"
WORK="$(mktemp -d /tmp/sluice-lock-scaling.XXXXXX)"
OUT="${OUT:-$ROOT/bench/results/lock-scaling-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT" "$WORK/eighth" || exit 1
trap 'rm -rf "$WORK"' EXIT

git -C "$ROOT" ls-files -z | (cd "$ROOT" && xargs -0 cp --parents -t "$WORK/eighth") || exit 1
cp "$ROOT/src/store/spinlock.c" "$ROOT/src/store/spinlock.h" "$WORK/eighth/src/store/"
python3 - "$WORK/eighth/src/store/spinlock.c" <<'EOF' || exit 1
import sys
p = sys.argv[1]
s = open(p).read()
i = s.index("void sl__spin_wait(sl__spinlock *l)")
s = s[:i] + """void sl__spin_wait(sl__spinlock *l)
{
    unsigned wait = 1, spent = 0;
    do {
        do {
            if (spent >= 1024) {
                sched_yield();
            } else {
                for (unsigned i = 0; i < wait; i++)
                    cpu_relax();
                spent += wait;
                wait = wait < 64 ? wait * 2 : wait;
            }
        } while (atomic_load_explicit(&l->held, memory_order_relaxed));
    } while (atomic_exchange_explicit(&l->held, 1, memory_order_acquire));
    (void)LEVEL_MAX;
    (void)SPIN_MAX;
}
"""
open(p, "w").write(s)
EOF
for side in now eighth; do
  src="$ROOT"; [ "$side" = eighth ] && src="$WORK/eighth"
  build_bench_decide "$src" "$WORK/build-$side" "$OUT/build.txt" || exit 1
done
echo "tree: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src include || echo ' (modified)'), keys: $KEYS" | tee "$OUT/revs.txt"

for round in $(seq 1 "$ROUNDS"); do
  for side in now eighth; do
    line=$(timeout 600 taskset -c 0,1 "$WORK/build-$side/bench/bench_decide" \
      -a gcra -k "$KEYS" -t 2 -d 2000000 -r 15 -s 2>>"$OUT/stderr.txt") ||
      { echo "FAILED: $side" >&2; continue; }
    echo "$line" | jq -c --arg tag "$side" '. + {tag: $tag}' | tee -a "$OUT/runs.jsonl"
  done
done >/dev/null

python3 - "$OUT" <<'EOF' | tee "$OUT/summary.md"
import json, os, statistics, sys
out = sys.argv[1]
runs = [json.loads(l) for l in open(os.path.join(out, "runs.jsonl"))]
print(open(os.path.join(out, "revs.txt")).read().strip() + "\n")
print("| build | 2 threads' speed-up (median of rounds) | range | lock waits per 1M two-thread decisions | 1 thread ns | 2 threads ns | rounds |")
print("|---|---|---|---|---|---|---|")
for side in ("now", "eighth"):
    rs = [r for r in runs if r["tag"] == side]
    if not rs:
        continue
    sp = [r["speedup_median"] for r in rs]
    # lock_waits counts the whole run; only its two-thread reps (warm-up
    # included) can wait.
    per = [r["lock_waits"] / ((r["reps"] + r["warmup"]) * r["decisions_per_rep"]) * 1e6 for r in rs]
    print(f'| {side} | {statistics.median(sp):.3f} | {min(sp):.2f}–{max(sp):.2f} | {statistics.median(per):.0f} | '
          f'{statistics.median(r["ns_one_thread_median"] for r in rs):.1f} | {statistics.median(r["ns_median"] for r in rs):.1f} | {len(rs)} |')
EOF
echo "results: $OUT"
