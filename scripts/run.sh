#!/usr/bin/env bash
# Sets up, builds and runs the main job (scripts/main.lua): on the GPU when one is present,
# else on the CPU at a small size. Extra arguments go to the script.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target engine_cli
exec build/engine run scripts/main.lua "$@"
