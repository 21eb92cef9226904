#!/bin/bash
# Installs what is missing, builds sluice and runs its main job: the
# rate-limit decision service on the embedded store, with the example
# rules, on 127.0.0.1:8080, its metrics on 127.0.0.1:9102 (Ctrl-C or
# SIGTERM stops it cleanly).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
exec ./build/sluice serve --rules examples/rules --listen 127.0.0.1:8080 \
  --metrics-listen 127.0.0.1:9102 "$@"
