#!/usr/bin/env bash
# On the GPU machine: unpacks gpu-pack/pack.tar.xz, puts the tree where the build expects it,
# and runs `tests` (ctest), `bench` (scripts/bench/*.lua with their PyTorch peers), or a command.
# Logs go under $OUT when it is set.
set -uo pipefail
cd "$(dirname "$0")/../.."
xz -dc gpu-pack/pack.tar.xz | tar -xf -
# The build has absolute paths to the tree it was made in (/work/main): point that at this copy.
if [ "$(pwd -P)" != /work/main ]; then mkdir -p /work && ln -sfn "$(pwd -P)" /work/main; fi
cd /work/main
export LD_LIBRARY_PATH=$PWD/gpu-libs:${LD_LIBRARY_PATH:-}
export PATH=$PWD/build-gpu:$PWD/gpu-libs:$PATH
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
what=${1:-tests}
shift || true
case "$what" in
  tests) (cd build-gpu && ctest --output-on-failure -j4 "$@" 2>&1 | tee "$OUT/ctest.log") ;;
  *) "$what" "$@" 2>&1 | tee "$OUT/run.log" ;;
esac
