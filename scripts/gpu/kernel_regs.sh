#!/usr/bin/env bash
# Registers and spills of the E23 register-tape kernels (e23_fwd_rt, e23_bwd_rt: 255 registers a
# thread, where one more live value spills) in seconds instead of e23.cu's ~4 minute build: a
# translation unit of e23.cu up to those kernels' includes, instantiated for bf16 alone, through
# ptxas -v with the flags of the configured build's e23.cu.
#   bash scripts/gpu/kernel_regs.sh [build dir, default build-gpu]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-gpu}
[ -f "$BUILD/build.ninja" ] || { echo "no configured build in $BUILD (bash scripts/gpu/pack.sh)" >&2; exit 1; }
src=$PWD/kernels/cuda/e23.cu
cut=$(grep -n '#include "cuda/e23_bwd_rt.cuh"' "$src" | cut -d: -f1)
[ -n "$cut" ] || { echo "e23.cu no longer includes cuda/e23_bwd_rt.cuh" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  head -n "$cut" "$src"
  echo 'template __global__ void e23_fwd_rt<__nv_bfloat16>(P23<__nv_bfloat16>);'
  echo 'template __global__ void e23_bwd_rt<__nv_bfloat16>(P23<__nv_bfloat16>);'
  echo '}  // namespace'
} >"$tmp/rt.cu"
# head, not grep -m1: grep's early exit would fail ninja's write, and so the pipeline (pipefail)
cmd=$(cd "$BUILD" && ninja -t commands | grep -- "-c $src " | head -n1 || true)
[ -n "$cmd" ] || { echo "no e23.cu command in $BUILD" >&2; exit 1; }
# one target (a cubin is one): sm_90, the clusters' (whatever archs the build has)
cmd=$(echo "$cmd" | sed -e "s# -MD -MT [^ ]* -MF [^ ]*##" -e 's# --generate-code=[^ ]*##g' -e 's# -arch=[^ ]*##g' \
  -e "s# -c $src -o [^ ]*# -arch=sm_90 -cubin -Xptxas -v $tmp/rt.cu -o $tmp/rt.cubin#")
if ! (cd "$BUILD" && eval "$cmd") >"$tmp/log" 2>&1 || ! grep -q "registers" "$tmp/log"; then
  cat "$tmp/log" >&2
  exit 1
fi
awk '
  /Compiling entry function/ { match($0, /e23_[a-z_]*rt/); name = substr($0, RSTART, RLENGTH) }
  /spill stores/ { spill = $0; sub(/^ */, "", spill) }
  /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); print name ": " substr($0, RSTART, RLENGTH) ", " spill }
' "$tmp/log"
