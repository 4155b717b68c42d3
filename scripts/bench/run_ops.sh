#!/usr/bin/env bash
# On the GPU machine: the PyTorch peer (scripts/peers/torch_ops.py), then our ops benchmark
# (scripts/bench/ops.lua) with the peer's numbers beside ours, one after the other on the same GPU.
#
#   bash scripts/bench/run_ops.sh [--quick]
#   bash scripts/gpu/run.sh bash scripts/bench/run_ops.sh   (the packed build: scripts/gpu/)
#
# Writes under $OUT (default /tmp/out): torch_ops.json/.log, ops.json, ops.csv, ops.log.
# The engine is $ENGINE, else `engine` on PATH, else build-gpu/engine; Python is $PYTHON or python3.
# Exit status: 0 when both ran every case, else 1 (the table is printed either way).
set -uo pipefail
cd "$(dirname "$0")/../.."

OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
for a in "$@"; do
  if [ "$a" != --quick ]; then
    echo "run_ops.sh: unknown argument '$a' (the only option is --quick)" >&2
    exit 2
  fi
done

. scripts/bench/engine_path.sh run_ops.sh
PYTHON=${PYTHON:-python3}

if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv 2>&1 | tee "$OUT/ops_gpu.txt"
fi

status=0
echo "== PyTorch peer: $PYTHON scripts/peers/torch_ops.py $*"
rm -f "$OUT/torch_ops.json"
"$PYTHON" scripts/peers/torch_ops.py --out "$OUT/torch_ops.json" "$@" 2>&1 \
  | tee "$OUT/torch_ops.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

peer=()
if [ -s "$OUT/torch_ops.json" ]; then
  peer=(--peer "$OUT/torch_ops.json")
else
  echo "run_ops.sh: the peer wrote no results; ops.lua runs without PyTorch's column" >&2
fi

echo
echo "== engine: $ENGINE run scripts/bench/ops.lua ${peer[*]:-} $*"
"$ENGINE" run scripts/bench/ops.lua ${peer[@]+"${peer[@]}"} --out "$OUT/ops.json" \
  --out "$OUT/ops.csv" "$@" 2>&1 | tee "$OUT/ops.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo
echo "run_ops.sh: logs and results in $OUT (status $status)"
exit $status
