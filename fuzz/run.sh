#!/bin/bash
# fuzz/run.sh - builds the libFuzzer targets with clang (ASan + UBSan) and
# runs each for a while.
#
#   fuzz/run.sh [SECONDS] [TARGET...]     default: 60 s, every target
#   fuzz/run.sh --smoke [TARGET...]       5,000 runs each from seed 1
#
# --smoke is scripts/test.sh's: the same inputs every time, so a failure
# reproduces, and a few seconds a target; it starts from the committed
# seeds only and keeps nothing it finds.
#
# Targets: fuzz_parse (sl_duration_parse, sl_algorithm_parse),
# fuzz_replay_line (the line parser of `sluice replay`), fuzz_store
# (limits, keys, costs and times through sl_check, sl_check_multi,
# sl_check_costs with and without SL_RECORD, sweeps and stats, with the
# store's invariants checked), fuzz_rules (one rules file through the
# YAML loader and a match), fuzz_http (the daemon's request path after
# HTTP framing: JSON bodies of /v1/check and /json, the query and
# Sluice-* headers of /v1/auth), fuzz_proxy (the proxy's request target,
# path normalisation, header gathering and filtering, client address and
# descriptors), fuzz_cluster (what a Redis node sends: MOVED and
# ASK errors, CLUSTER SLOTS replies through hiredis's reader, a decision
# call's replies (five integers an item, a bucket's one), a Sentinel's
# answer and a ROLE reply, key slots,
# a client key as a key name whose hash tag is all of it),
# fuzz_resp (Redis protocol requests split into reads at any point, and
# CL.THROTTLE/GCRA read from them), fuzz_advice (an advisor's answer:
# the HTTP response through the admin client's reader, split at any
# point, and the sluice-advisor/1 JSON through its parser; and what
# `sluice advisor` reads of a node: Prometheus text, /v1/rules),
# fuzz_grpc_pb (the gRPC door's protobuf codec: RateLimitRequest and
# HealthCheckRequest decoded, a response encoded from them),
# fuzz_grpc_h2 (its HTTP/2 session with the real methods, bytes in
# pieces, timeouts and a drain), fuzz_json (the decision requests' JSON
# scanner against jansson: the same verdict and the same values),
# fuzz_label (/metrics' label values from any bytes: valid UTF-8,
# capped, escaped), fuzz_state (a memory store's state file through its
# loader, checksums made right for odd first bytes, and a loaded store
# saved and loaded back).
# Each starts from the
# seeds in fuzz/corpus/TARGET and keeps what it finds in
# build-fuzz/corpus/TARGET; a crash is written to build-fuzz/artifacts/
# and makes the script exit 1.  Reproduce one with
#   build-fuzz/TARGET build-fuzz/artifacts/crash-...
# (fuzz_store also explains it with SL_FUZZ_TRACE=1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
smoke=0
if [ "${1:-}" = --smoke ]; then
  smoke=1
  shift
  limit=(-runs=5000 -seed=1)
else
  seconds=${1:-60}
  shift || true
  limit=(-max_total_time="$seconds")
fi
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_parse fuzz_replay_line fuzz_store fuzz_rules fuzz_http fuzz_proxy fuzz_cluster fuzz_resp fuzz_advice fuzz_grpc_pb fuzz_grpc_h2 fuzz_json fuzz_label fuzz_state)
build=${SL_FUZZ_BUILD:-$root/build-fuzz}

command -v clang >/dev/null || { echo "fuzz/run.sh: clang is needed (apt-get install clang)" >&2; exit 2; }
CC=clang cmake -S "$root/fuzz" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
mkdir -p "$build/artifacts"

status=0
summary=()
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  [ "$smoke" = 1 ] && corpus="$build/smoke/$t" && rm -rf "$corpus"
  mkdir -p "$corpus"
  echo "=== $t: ${limit[*]} ==="
  rc=0
  "$build/$t" "${limit[@]}" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$t-" "$corpus" "$root/fuzz/corpus/$t" \
    >"$build/$t.log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/$t.log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$build/$t.log" | tail -1 || true)
  if [ "$rc" -eq 0 ]; then
    summary+=("PASS: $t: ${runs:-?} runs (${limit[*]}), $cov, corpus $(ls "$corpus" | wc -l) inputs")
  else
    status=1
    summary+=("FAIL: $t: exit $rc after ${runs:-?} runs; see $build/$t.log")
    grep -E '^(fuzz_|==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$build/$t.log" | head -5 || true
  fi
done
printf '%s\n' "${summary[@]}"
echo "fuzz targets: $(printf '%s\n' "${summary[@]}" | grep -c '^PASS') of ${#targets[@]} passed"
exit $status
