#!/bin/bash
# Installs what is missing, builds sluice and runs its main job: for now a
# walk through every algorithm on the seed documents' worked examples.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
exec ./build/sluice demo
