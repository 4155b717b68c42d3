#!/usr/bin/env bash
# On the GPU machine (through scripts/gpu/run.sh): one kernel under Nsight Compute with the full
# section set and per-instruction SASS, written under $OUT as NAME.ncu-rep, NAME_details.txt and
# NAME_sass.csv (executed instructions and stall samples per SASS line).
#   bash scripts/gpu/run.sh bash scripts/gpu/ncu_kernel.sh NAME KERNEL_REGEX command...
set -uo pipefail
name=$1 regex=$2
shift 2
OUT=${OUT:-/tmp/out}
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
"$NCU" --kernel-name "regex:$regex" --launch-count 1 --set full --import-source yes \
  -f -o "$OUT/$name" "$@" >"$OUT/${name}_run.log" 2>&1 || { tail -20 "$OUT/${name}_run.log"; exit 1; }
"$NCU" --import "$OUT/$name.ncu-rep" --page details >"$OUT/${name}_details.txt"
"$NCU" --import "$OUT/$name.ncu-rep" --page source --csv --print-source sass >"$OUT/${name}_sass.csv"
echo "$name: $(wc -l <"$OUT/${name}_sass.csv") SASS lines"
