#!/usr/bin/env bash
# Sets up, builds and runs the main job, the E88 profiling study (scripts/profile_e88.lua): the
# 436.7M-parameter model on the GPU when one is present, else a small configuration on the CPU.
# Extra arguments go to the script (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target engine_cli
exec build/engine run scripts/profile_e88.lua "$@"
