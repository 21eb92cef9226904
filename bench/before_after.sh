#!/bin/bash
# bench/before_after.sh - one sl_check()'s cost before and after a change,
# measured side by side in one run with the bare C table (the peer).
#
#   bench/before_after.sh REV        REV: the "before" commit (e.g. main)
#
# Builds bench_decide of REV (git archive into a temporary directory) and
# of this tree (RelWithDebInfo, as bench/run.sh), and the peer
# ($PEERS_DIR/c/gcra_bench.c, gcc -O2) twice: as it is, and "serial", each
# decision's key made to depend on the slot the last one read (the
# slot's TAT >> 63, which is 0: the value changes nothing, the dependency
# stops the processor from starting the next decision's cache miss before
# the last one's has returned; the peer's own loop, ~65 instructions a
# decision, lets it overlap about four).  One sl_check call at a time is
# the serial case: its ~260 instructions after a key's miss fill the
# processor's reorder window, so the next call's miss cannot start early
# (docs/benchmarks.md, "One call at a time").  Then, ROUNDS times (default
# 3), in an order that rotates every round: before, after and the peer on
# gcra for 1 key, 1M and 10M keys, pinned to CPU 0, and at 1M and 10M keys
# the serial peer and this tree's sl_check_batch (-b 64); and before and
# after with 2 threads (CPUs 0 and 1) on 1 key and 1M keys, each with -s
# where its bench_decide has it (one-thread and two-thread reps in pairs,
# whose speed-ups are far steadier than two runs').  Prints one
# JSON line per run and a table of medians; instructions per decision
# (valgrind, the difference of two runs) for 1 key and 100k keys close
# the run.
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
source "$ROOT/bench/lib.sh" # build_bench_decide
REV="${1:?usage: bench/before_after.sh REV}"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}"
ROUNDS="${ROUNDS:-3}"
WORK="$(mktemp -d /tmp/sluice-before-after.XXXXXX)"
OUT="${OUT:-$ROOT/bench/results/before-after-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT" "$WORK/src" || exit 1
trap 'rm -rf "$WORK"' EXIT

git -C "$ROOT" archive "$REV" | tar -x -C "$WORK/src" || exit 1
for side in before after; do
  src="$WORK/src"; [ "$side" = after ] && src="$ROOT"
  build_bench_decide "$src" "$WORK/build-$side" "$OUT/build.txt" || exit 1
done
gcc -O2 -Wall -o "$WORK/peer" "$PEERS_DIR/c/gcra_bench.c" || exit 1
sed 's|allowed += gcra(find_or_insert(key), now, T, tau);|{ slot_t *s_ = find_or_insert(key); allowed += gcra(s_, now, T, tau); rng += s_->tat >> 63; }|' \
  "$PEERS_DIR/c/gcra_bench.c" >"$WORK/peer_serial.c"
grep -q 'rng += s_->tat >> 63' "$WORK/peer_serial.c" &&
  gcc -O2 -Wall -o "$WORK/peer_serial" "$WORK/peer_serial.c" ||
  echo "the peer's loop changed: no serial peer" >&2
echo "before: $(git -C "$ROOT" rev-parse --short "$REV"), after: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src include || echo ' (modified)')" | tee "$OUT/revs.txt"

# run TAG CPUS CMD...: one JSON line, tagged, into runs.jsonl.
run() {
  local tag=$1 cpus=$2 line; shift 2
  line=$(timeout 600 taskset -c "$cpus" "$@" 2>>"$OUT/stderr.txt") || { echo "FAILED: $tag" >&2; return; }
  echo "$line" | jq -c --arg tag "$tag" '. + {tag: $tag}' | tee -a "$OUT/runs.jsonl"
}
B="$WORK/build-before/bench/bench_decide" A="$WORK/build-after/bench/bench_decide"
paired() { "$1" -h | grep -q '^  -s'; }
PB=0 PA=0; paired "$B" && PB=1; paired "$A" && PA=1
CASES=(
  "1 0 5000000 50000000 1" "1000000 0 3000000 10000000 1" "10000000 0 2000000 5000000 1"
  "1 0,1 3000000 - 2" "1000000 0,1 2000000 - 2"
)
for round in $(seq 1 "$ROUNDS"); do
  for c in "${CASES[@]}"; do
    set -- $c
    keys=$1 cpus=$2 d=$3 pd=$4 t=$5
    cmds=("before" "after" "peer")
    [ "$pd" = - ] && cmds=("before" "after")
    [ "$keys" -ge 1000000 ] && [ "$pd" != - ] && [ -x "$WORK/peer_serial" ] &&
      cmds+=("serial" "batch")
    n=${#cmds[@]}
    for k in $(seq 0 $((n - 1))); do
      who=${cmds[$(((k + round) % n))]}
      case $who in
        before) s=(); [ "$t" -gt 1 ] && [ $PB = 1 ] && s=(-s)
          run "before $keys keys $t threads" "$cpus" "$B" -a gcra -k "$keys" -d "$d" -t "$t" ${s[@]+"${s[@]}"} ;;
        after) s=(); [ "$t" -gt 1 ] && [ $PA = 1 ] && s=(-s)
          run "after $keys keys $t threads" "$cpus" "$A" -a gcra -k "$keys" -d "$d" -t "$t" ${s[@]+"${s[@]}"} ;;
        peer) run "peer $keys keys 1 threads" "$cpus" "$WORK/peer" "$keys" "$pd" 0 0 ;;
        serial) run "serial $keys keys 1 threads" "$cpus" "$WORK/peer_serial" "$keys" "$pd" 0 0 ;;
        batch) run "batch $keys keys 1 threads" "$cpus" "$A" -a gcra -k "$keys" -d "$d" -t 1 -b 64 ;;
      esac
    done
  done
done >/dev/null

insn() { # BINARY ARGS...: instructions per decision, 600k minus 200k decisions
  local a b
  c() { valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
        awk '/I *refs:/ {gsub(",", "", $NF); print $NF}'; }
  a=$(c "$1" -a gcra -k "$2" -d 200000 -r 1 -w 0); b=$(c "$1" -a gcra -k "$2" -d 600000 -r 1 -w 0)
  echo $(((b - a) / 400000))
}
insn_peer() {
  local a b
  c() { valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$WORK/peer" "$1" "$2" 0 0 2>&1 >/dev/null |
        awk '/I *refs:/ {gsub(",", "", $NF); print $NF}'; }
  a=$(c "$1" 100000); b=$(c "$1" 300000)
  echo $(((b - a) / 1200000))
}
if command -v valgrind >/dev/null; then
  for keys in 1 100000; do
    jq -nc --argjson k "$keys" --argjson b "$(insn "$B" "$keys")" --argjson a "$(insn "$A" "$keys")" \
      --argjson p "$(insn_peer "$keys")" '{keys: $k, insn_before: $b, insn_after: $a, insn_peer: $p}' >>"$OUT/insn.jsonl"
  done
fi

python3 - "$OUT" <<'EOF' | tee "$OUT/summary.md"
import json, os, statistics, sys
out = sys.argv[1]
runs = [json.loads(l) for l in open(os.path.join(out, "runs.jsonl"))]
print(open(os.path.join(out, "revs.txt")).read().strip() + "\n")
print("| keys | threads | before ns (median) | after ns (median) | peer ns (median) | before/peer | after/peer | after B/key (store / RSS) | before B/key (store / RSS) | runs each |")
print("|---|---|---|---|---|---|---|---|---|---|")
groups = {}
for r in runs:
    who, keys, _, t, _ = r["tag"].split(" ")
    groups.setdefault((int(keys), int(t)), {}).setdefault(who, []).append(r)
for (k, t) in sorted(groups):
    g = groups[(k, t)]
    med = {w: statistics.median(x["ns_median"] for x in rs) for w, rs in g.items()}
    def b(w):
        if k == 1 or w not in g: return "–"
        x = g[w][0]
        return f'{x["store_bytes_per_key"]:.1f} / {statistics.median(y["rss_bytes_per_key"] for y in g[w]):.1f}'
    p = med.get("peer")
    ratio = lambda w: f"{med[w] / p:.2f}" if p else "–"
    print(f'| {k} | {t} | {med["before"]:.1f} | {med["after"]:.1f} | {"–" if p is None else round(p, 1)} | {ratio("before")} | {ratio("after")} | {b("after")} | {b("before")} | {len(g["after"])} |')
one = {k: statistics.median(x["ns_median"] for x in g["after"]) for (k, t), g in groups.items() if t == 1}
print("\n| keys | after, 1 thread ns | after, 2 threads ns (both) | 2 threads' speed-up (paired: -s) | before: the same | serial peer ns | after / serial peer | after, sl_check_batch of 64 ns | batch / peer |")
print("|---|---|---|---|---|---|---|---|---|")
def speedup(k, who, one):
    # Paired reps where the run had them (-s), else two runs' medians.
    two = groups.get((k, 2), {}).get(who)
    if not two:
        return "–"
    if all("speedup_median" in x for x in two):
        return f'{statistics.median(x["speedup_median"] for x in two):.2f} (paired)'
    if one is None:
        return "–"
    return f'{one / statistics.median(x["ns_median"] for x in two):.2f}'
for (k, t) in sorted(groups):
    g = groups[(k, t)]
    if t != 1:
        continue
    m = lambda w: statistics.median(x["ns_median"] for x in g[w]) if w in g else None
    two = groups.get((k, 2), {}).get("after")
    tm = statistics.median(x["ns_median"] for x in two) if two else None
    f = lambda v: "–" if v is None else f"{v:.1f}"
    r = lambda a, b: "–" if a is None or b is None else f"{a / b:.2f}"
    print(f'| {k} | {f(m("after"))} | {f(tm)} | {speedup(k, "after", m("after"))} | {speedup(k, "before", m("before"))} | {f(m("serial"))} | {r(m("after"), m("serial"))} | {f(m("batch"))} | {r(m("batch"), m("peer"))} |')
p = os.path.join(out, "insn.jsonl")
if os.path.exists(p):
    print("\nInstructions per decision (valgrind, bench loop included):", "; ".join(
        f'{i["keys"]} keys: before {i["insn_before"]}, after {i["insn_after"]}, peer {i["insn_peer"]}' for i in map(json.loads, open(p))))
EOF
echo "results: $OUT"
