#!/bin/bash
# bench/run.sh - ns per decision and bytes per key of libsluice's memory
# store, next to the bare C GCRA table of the peer benchmarks measured in
# the same run.
#
#   bench/run.sh            full run (about 10 minutes)
#   QUICK=1 bench/run.sh    shorter: one paired round, no 10M-key matrix
#
# Steps:
#  1. builds bench_decide (RelWithDebInfo: -O2 -g) into build-bench/ and the
#     peer, $PEERS_DIR/c/gcra_bench.c, with gcc -O2 next to it;
#  2. paired: sluice gcra and the peer (args NKEYS DECISIONS 0 0) for 1 key,
#     1M and 10M keys, alternating (the order flips every round), pinned
#     with taskset -c 0, ROUNDS rounds; the ratio sluice/peer per pair;
#  3. matrix: every algorithm x {1, 1M, 10M keys} (sliding_log: 1, 100k, 1M)
#     x {1 thread on CPU 0, 2 threads on CPUs 0 and 1};
#  4. instructions per decision: perf stat if the machine has hardware
#     counters, else valgrind (cachegrind, the same count, exact), as the
#     difference of two runs that differ only in decisions; 4b. data cache
#     lines per decision in valgrind's cache simulation;
#  5. summary.md: the tables, from the JSON lines.
# Results: bench/results/<UTC time>/ (git-ignored); the last lines printed
# are the summary.
#
# The machine is shared: before each measurement the script waits (up to
# QUIET_MAX s, default 4) for the whole machine to be below 10% of one core
# busy for 2 s, as $PEERS_DIR/common.sh does, and records the wait;
# the summary marks with * the figures measured after it gave up.
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD:-$ROOT/build-bench}"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}" # the peers, beside the repository
PEER_SRC="${PEER_SRC:-$PEERS_DIR/c/gcra_bench.c}"
OUT="${OUT:-$ROOT/bench/results/$(date -u +%Y%m%dT%H%M%SZ)}"
QUICK="${QUICK:-0}"
QUIET_MAX="${QUIET_MAX:-4}"
CPU1=0      # one thread: CPU 0, as the peers' servers
CPU2=0,1    # two threads: one on each CPU of this 2-core machine
if [ "$QUICK" = 1 ]; then ROUNDS="${ROUNDS:-1}"; else ROUNDS="${ROUNDS:-3}"; fi

BENCH="$BUILD/bench/bench_decide"
PEER="$BUILD/gcra_bench"
mkdir -p "$OUT" || exit 1

log() { echo "$*" | tee -a "$OUT/log.txt" >&2; }

# Same test as common.sh's wait_quiet (busy ticks of all CPUs over 2 s),
# with a shorter default limit; prints the seconds waited.
busy_ticks() {
  local c u n s i io irq sirq st rest
  read -r c u n s i io irq sirq st rest </proc/stat
  echo $((u + n + s + irq + sirq + st))
}
wait_quiet() {
  local waited=0 a b
  while [ "$waited" -lt "$QUIET_MAX" ]; do
    a=$(busy_ticks); sleep 2; b=$(busy_ticks)
    [ $((b - a)) -lt 20 ] && break
    waited=$((waited + 2))
  done
  echo "$waited"
}

# run_case FILE TAG CPUS CMD...: waits for quiet, runs CMD pinned, appends
# its JSON line to FILE with the tag, the wait and the CPUs added.
run_case() {
  local file=$1 tag=$2 cpus=$3; shift 3
  local q line t0=$SECONDS
  q=$(wait_quiet)
  line=$(timeout 300 taskset -c "$cpus" "$@" 2>>"$OUT/stderr.txt")
  local rc=$?
  t0=$((SECONDS - t0))
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    log "FAILED ($rc): taskset -c $cpus $*"
    return 1
  fi
  echo "$line" | jq -c --arg tag "$tag" --arg cpus "$cpus" --argjson q "$q" \
    --arg cmd "taskset -c $cpus $*" \
    '. + {tag: $tag, cpus: $cpus, quiet_wait_s: $q, cmd: $cmd}' >>"$file"
  log "$tag: $(echo "$line" | jq -r '"\(.ns_median) ns (min \(.ns_min), max \(.ns_max))"') [quiet wait ${q}s, ${t0}s in all]"
}

# ---- 1. build ----
log "# bench/run.sh $(date -u +%FT%TZ) QUICK=$QUICK ROUNDS=$ROUNDS"
{
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src include || echo ' (src or include modified)')"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "kernel: $(uname -r)"
  echo "memory: $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
  echo "compiler: $(gcc --version | head -1)"
  echo "thp: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$OUT/build.txt" 2>&1 &&
  cmake --build "$BUILD" --target bench_decide -j"$(nproc)" >>"$OUT/build.txt" 2>&1 &&
  gcc -O2 -Wall -o "$PEER" "$PEER_SRC" >>"$OUT/build.txt" 2>&1 ||
  { cat "$OUT/build.txt"; exit 1; }
grep -E '^CMAKE_C_FLAGS_RELWITHDEBINFO' "$BUILD/CMakeCache.txt" >>"$OUT/machine.txt"

# ---- 2. paired: sluice gcra and the peer, alternating ----
# keys, sluice decisions per repetition, peer decisions per repetition
# (the peer is ~10x faster, so it gets more to run a comparable time)
PAIRS=("1 5000000 50000000" "1000000 3000000 10000000" "10000000 2000000 5000000")
for round in $(seq 1 "$ROUNDS"); do
  for p in "${PAIRS[@]}"; do
    set -- $p
    keys=$1 sd=$2 pd=$3
    sluice=(run_case "$OUT/paired.jsonl" "round $round sluice gcra $keys" $CPU1
            "$BENCH" -a gcra -k "$keys" -d "$sd")
    batch=(run_case "$OUT/paired.jsonl" "round $round sluice gcra batch $keys" $CPU1
           "$BENCH" -a gcra -k "$keys" -d "$sd" -b 64)
    peer=(run_case "$OUT/paired.jsonl" "round $round peer $keys" $CPU1
          "$PEER" "$keys" "$pd" 0 0)
    if [ $((round % 2)) = 1 ]; then "${peer[@]}"; "${sluice[@]}"; "${batch[@]}"
    else "${sluice[@]}"; "${batch[@]}"; "${peer[@]}"; fi
  done
done

# ---- 3. matrix ----
ALGS=(token_bucket gcra leaky_bucket fixed_window sliding_window sliding_log stepped_window)
for alg in "${ALGS[@]}"; do
  if [ "$alg" = sliding_log ]; then sizes=(1 100000 1000000)
  elif [ "$QUICK" = 1 ]; then sizes=(1 1000000)
  else sizes=(1 1000000 10000000); fi
  for keys in "${sizes[@]}"; do
    case $keys in 1) d=3000000 ;; *) d=2000000 ;; esac
    for threads in 1 2; do
      # gcra on one thread is the paired cases' sluice side
      [ "$alg" = gcra ] && [ "$threads" = 1 ] && continue
      cpus=$CPU1; [ "$threads" = 2 ] && cpus=$CPU2
      run_case "$OUT/matrix.jsonl" "$alg $keys keys $threads threads" "$cpus" \
        "$BENCH" -a "$alg" -k "$keys" -d "$d" -t "$threads"
    done
  done
done

# ---- 4. instructions per decision ----
# count CMD...: user-space instructions of one run.
if perf stat -x, -e instructions:u true 2>&1 | grep -q '^[0-9]'; then
  COUNTER="perf stat -e instructions:u"
  count() { perf stat -x, -e instructions:u -- "$@" 2>&1 >/dev/null | awk -F, '/instructions/ {print $1}'; }
elif command -v valgrind >/dev/null; then
  COUNTER="valgrind --tool=cachegrind --cache-sim=no (perf has no hardware counters here)"
  count() {
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
      awk '/I *refs:/ {gsub(",", "", $NF); print $NF}'
  }
else
  COUNTER=""
fi
echo "instruction counter: ${COUNTER:-none}" >>"$OUT/machine.txt"
# insn TAG KEYS D1 D2 PER_D CMD-with-@D@: (count(D2) - count(D1)) / (PER_D * (D2 - D1))
insn() {
  local tag=$1 keys=$2 d1=$3 d2=$4 per=$5; shift 5
  local a b
  a=$(count "${@//@D@/$d1}"); b=$(count "${@//@D@/$d2}")
  [ -n "$a" ] && [ -n "$b" ] || { log "insn $tag: no count"; return; }
  jq -nc --arg tag "$tag" --argjson keys "$keys" --argjson a "$a" --argjson b "$b" \
    --argjson n $(( per * (d2 - d1) )) --arg counter "$COUNTER" \
    '{tag: $tag, keys: $keys, insn_per_decision: (($b - $a) / $n * 10 | round / 10), counter: $counter}' \
    >>"$OUT/insn.jsonl"
  log "insn $tag: $(tail -1 "$OUT/insn.jsonl" | jq .insn_per_decision) [${SECONDS}s since start]"
}
if [ -n "$COUNTER" ]; then
  for keys in 1 100000; do
    # the peer always runs 6 repetitions of DECISIONS
    insn "peer $keys" "$keys" 100000 300000 6 "$PEER" "$keys" @D@ 0 0
    insn "sluice gcra $keys" "$keys" 200000 600000 1 "$BENCH" -a gcra -k "$keys" -d @D@ -r 1 -w 0
  done
  if [ "$QUICK" != 1 ]; then
    for alg in "${ALGS[@]}"; do
      [ "$alg" = gcra ] && continue
      insn "sluice $alg 1" 1 100000 300000 1 "$BENCH" -a "$alg" -k 1 -d @D@ -r 1 -w 0
    done
  fi
fi

# ---- 4b. cache lines per decision ----
# Data cache misses per decision in valgrind's cache simulation (the
# host's D1 and last-level geometry): at 100k keys, beyond D1 but within
# the last level, D1 misses per decision are the lines a decision brings
# in.  sluice: callgrind counting only inside its timed threads
# (worker_main), so its random seed does not matter; the peer, which is
# deterministic: the difference of two cachegrind runs, as in step 4.
if command -v valgrind >/dev/null; then
  lines_sluice() { # KEYS DECISIONS
    local f="$OUT/callgrind.$1.out"
    valgrind --tool=callgrind --cache-sim=yes --toggle-collect=worker_main \
      --callgrind-out-file="$f" "$BENCH" -a gcra -k "$1" -d "$2" -r 1 -w 0 >/dev/null 2>&1
    callgrind_annotate "$f" 2>/dev/null | sed 's/([^)]*)//g' | awk -v d="$2" -v k="$1" '
      /^Events shown/ {for (i = 3; i <= NF; i++) ev[i - 2] = $i; n = NF - 2}
      /PROGRAM TOTALS/ {for (i = 1; i <= n; i++) {v = $i; gsub(",", "", v); if (v == ".") v = 0; c[ev[i]] = v / d}
        printf "{\"tag\":\"sluice gcra\",\"keys\":%d,\"insn\":%.1f,\"data_refs\":%.1f,\"d1_misses\":%.2f,\"ll_misses\":%.2f}\n",
          k, c["Ir"], c["Dr"] + c["Dw"], c["D1mr"] + c["D1mw"], c["DLmr"] + c["DLmw"]}'
  }
  lines_peer() { # KEYS: (run of 6 x 300000) - (run of 6 x 100000)
    local a b
    cg() {
      valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=/dev/null "$PEER" "$1" "$2" 0 0 2>&1 >/dev/null |
        awk '/I *refs:/ {gsub(",", "", $4); i = $4} /D *refs:/ {gsub(",", "", $4); r = $4}
             /D1 *misses:/ {gsub(",", "", $4); m = $4} /LLd *misses:/ {gsub(",", "", $4); l = $4}
             END {print i, r, m, l}'
    }
    read -r -a a <<<"$(cg "$1" 100000)"; read -r -a b <<<"$(cg "$1" 300000)"
    jq -nc --argjson k "$1" --argjson n 1200000 --argjson i "$(( b[0] - a[0] ))" --argjson r "$(( b[1] - a[1] ))" \
      --argjson m "$(( b[2] - a[2] ))" --argjson l "$(( b[3] - a[3] ))" \
      '{tag: "peer", keys: $k, insn: ($i / $n * 10 | round / 10), data_refs: ($r / $n * 10 | round / 10),
        d1_misses: ($m / $n * 100 | round / 100), ll_misses: ($l / $n * 100 | round / 100)}'
  }
  for keys in 1 100000; do
    lines_sluice "$keys" 300000 >>"$OUT/lines.jsonl"
    lines_peer "$keys" >>"$OUT/lines.jsonl"
    log "cache lines, $keys keys: $(tail -2 "$OUT/lines.jsonl" | jq -c '[.tag, .d1_misses]' | tr '\n' ' ')"
  done
fi

# ---- 5. summary ----
python3 - "$OUT" "$QUIET_MAX" <<'EOF' | tee "$OUT/summary.md"
import json, os, statistics, sys
out, quiet_max = sys.argv[1], int(sys.argv[2])
def busy(rs):
    return "*" if any(r.get("quiet_wait_s", 0) >= quiet_max for r in rs) else ""
def load(name):
    p = os.path.join(out, name)
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
paired, matrix, insn = load("paired.jsonl"), load("matrix.jsonl"), load("insn.jsonl")
print("```\n" + open(os.path.join(out, "machine.txt")).read().strip() + "\n```\n")
def name(k):
    return {1: "1 key", 100000: "100k keys", 1000000: "1M keys", 10000000: "10M keys"}.get(k, f"{k} keys")
ins = {(i["tag"].rsplit(" ", 1)[0], i["keys"]): i["insn_per_decision"] for i in insn}
print("## sluice gcra vs the bare C table (peer), 1 thread, CPU 0, same run\n")
print("| keys | sluice ns/decision (sl_check) | sluice ns/decision (sl_check_batch, 64) | peer ns/decision | ratio sluice/peer (median of pairs) | ratio batch/peer | pairs | sluice decisions/s | sluice B/key (store / RSS) | peer B/key |")
print("|---|---|---|---|---|---|---|---|---|---|")
for k in sorted({r["keys"] for r in paired if r["bench"] == "sluice_decide"}):
    s = [r for r in paired if r["bench"] == "sluice_decide" and r["keys"] == k and not r.get("batch")]
    sb = [r for r in paired if r["bench"] == "sluice_decide" and r["keys"] == k and r.get("batch")]
    p = [r for r in paired if r["bench"] == "c_gcra_hash" and r["nkeys"] == k]
    if not s or not p:
        continue
    ratios = [a["ns_median"] / b["ns_median"] for a, b in zip(s, p)]
    bratios = [a["ns_median"] / b["ns_median"] for a, b in zip(sb, p)] or [float("nan")]
    bm = statistics.median(r["ns_median"] for r in sb) if sb else float("nan")
    sm, pm = statistics.median(r["ns_median"] for r in s), statistics.median(r["ns_median"] for r in p)
    kb = "–" if k == 1 else f'{s[0]["store_bytes_per_key"]:.1f} / {statistics.median(r["rss_bytes_per_key"] for r in s):.1f}'
    pb = "–" if k == 1 else f'{p[0]["bytes_per_key"]:.1f}'
    print(f"| {name(k)} | {sm:.1f}{busy(s)} | {bm:.1f}{busy(sb)} | {pm:.1f}{busy(p)} | {statistics.median(ratios):.2f} (range {min(ratios):.2f}–{max(ratios):.2f}) | {statistics.median(bratios):.2f} (range {min(bratios):.2f}–{max(bratios):.2f}) | {len(ratios)} | {1e9 / sm / 1e6:.2f}M | {kb} | {pb} |")
if ins:
    print("\nInstructions per decision (" + insn[0]["counter"] + "):", ", ".join(f'{t} {name(k)}: {v}' for (t, k), v in ins.items()))
lines = load("lines.jsonl")
if lines:
    print("\nPer decision in valgrind's cache simulation (bench loop included; D1 misses at 100k keys are the lines a decision brings in):\n")
    print("| who | keys | instructions | data reads+writes | D1 misses | last-level misses |")
    print("|---|---|---|---|---|---|")
    for l in lines:
        print(f'| {l["tag"]} | {name(l["keys"])} | {l["insn"]} | {l["data_refs"]} | {l["d1_misses"]} | {l["ll_misses"]} |')
print("\n## every algorithm (gcra on 1 thread: the paired runs above)\n")
print("| algorithm | keys | threads | ns/decision (median) | min–max | decisions/s | allowed | store B/key | RSS B/key (filled / end) | evicted |")
print("|---|---|---|---|---|---|---|---|---|---|")
rows = matrix + [r for r in paired if r["bench"] == "sluice_decide" and not r.get("batch")]
groups = {}
for r in rows:
    groups.setdefault((r["algorithm"], r["keys"], r["threads"]), []).append(r)
order = ["token_bucket", "gcra", "leaky_bucket", "fixed_window", "sliding_window", "sliding_log", "stepped_window"]
for (alg, k, t) in sorted(groups, key=lambda g: (order.index(g[0]), g[1], g[2])):
    g = groups[(alg, k, t)]
    r = min(g, key=lambda x: abs(x["ns_median"] - statistics.median(y["ns_median"] for y in g)))
    mem = "–" if k == 1 else f'{r["store_bytes_per_key"]:.1f}'
    rss = "–" if k == 1 else f'{r["rss_bytes_per_key"]:.1f} / {r["rss_bytes_per_key_end"]:.1f}'
    note = f" ({len(g)} runs)" if len(g) > 1 else ""
    print(f'| {alg} | {name(k)} | {t} | {r["ns_median"]:.1f}{busy(g)}{note} | {r["ns_min"]:.1f}–{r["ns_max"]:.1f} | {r["decisions_per_s"] / 1e6:.2f}M | {r["allowed_frac"]:.3f} | {mem} | {rss} | {r["evicted"]} |')
waits = [r["quiet_wait_s"] for r in paired + matrix]
if waits:
    print(f"\n*: {sum(1 for w in waits if w >= quiet_max)} of {len(waits)} measurements started on a busy machine (still over 10% of a core busy after {quiet_max} s)")
EOF
log "results: $OUT (${SECONDS}s)"
