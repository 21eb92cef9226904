#!/bin/bash
# Installs what is missing, builds sluice and runs every test three times:
# a normal build, an ASan+UBSan build, and a ThreadSanitizer build of the
# threaded tests, each with warnings as errors (-DSL_WERROR=ON: the default
# build leaves them warnings, so that a user's compiler never stops it).
# ctest prints the totals of each run; it runs as many tests at a time as
# there are cores (each test has its own free ports and directory, and
# none depends on having the machine to itself: docs/design.md, "Tests
# and time").  Then every fuzz target runs a short fixed-seed session
# (fuzz/run.sh --smoke), so that a harness the code has moved away from
# fails here and not first when someone fuzzes.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh --fuzz
jobs=$(nproc)

run() { # build-dir, cmake flags..., -- ctest flags...
  local dir=$1; shift
  local cmake_args=() ctest_args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do cmake_args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  ctest_args=("$@")
  echo "=== $dir: cmake ${cmake_args[*]} ==="
  cmake -S . -B "$dir" "${cmake_args[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
  # -LE "long|lab": the 10-minute soak and the load lab's quick profile
  # (tests/CMakeLists.txt) are run by hand: ctest -L long, ctest -L lab.
  (cd "$dir" && ctest --output-on-failure -j"$jobs" -LE "long|lab" "${ctest_args[@]}")
}

run build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSL_WERROR=ON
SL_TEST_QUICK=1 run build-asan -DCMAKE_BUILD_TYPE=Debug -DSL_SANITIZE=address -DSL_WERROR=ON
TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp" SL_TEST_QUICK=1 run build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSL_SANITIZE=thread -DSL_WERROR=ON -- -R "threads|serve|proxy|resp|grpc|admin|advisor|override|status|tls|sentinel|state"
echo "=== build-fuzz: fuzz/run.sh --smoke ==="
fuzz/run.sh --smoke
echo "all test runs passed"
