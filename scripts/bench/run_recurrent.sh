#!/usr/bin/env bash
# On the GPU machine: the PyTorch peer (scripts/peers/torch_recurrent.py), then our recurrent-kernel
# benchmark (scripts/bench/recurrent.lua) with the peer's forward and backward beside ours, one
# after the other on the same GPU.
#
#   bash scripts/bench/run_recurrent.sh [--quick] [--only NAME] [--ckpt-every C]
#   bash scripts/gpu/run.sh bash scripts/bench/run_recurrent.sh   (the packed build: scripts/gpu/)
#
# --ckpt-every goes to ours only (PyTorch eager keeps every step for its autograd).
# Writes under $OUT (default /tmp/out): torch_recurrent.json/.log, recurrent.log, recurrent_gpu.txt.
# The engine is $ENGINE, else `engine` on PATH, else build-gpu/engine; Python is $PYTHON or python3.
# Where nvidia-smi is found the peer gets --require-cuda (no silent CPU smoke run in its place).
# Exit status: 0 when both ran every case, else 1 (the table is printed either way).
set -uo pipefail
cd "$(dirname "$0")/../.."

OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
pass=() ours=()
need_value() {  # option, the arguments left
  if [ "$2" -lt 2 ]; then
    echo "run_recurrent.sh: $1 needs a value" >&2
    exit 2
  fi
}
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) pass+=(--quick) ;;
    --only)
      need_value "$1" $#
      pass+=(--only "$2")
      shift
      ;;
    --ckpt-every)
      need_value "$1" $#
      ours+=(--ckpt-every "$2")
      shift
      ;;
    *)
      echo "run_recurrent.sh: unknown argument '$1' (the options are --quick, --only NAME and --ckpt-every C)" >&2
      exit 2
      ;;
  esac
  shift
done

. scripts/bench/engine_path.sh run_recurrent.sh
PYTHON=${PYTHON:-python3}

need_cuda=()
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv 2>&1 | tee "$OUT/recurrent_gpu.txt"
  need_cuda=(--require-cuda)
fi

status=0
echo "== PyTorch peer: $PYTHON scripts/peers/torch_recurrent.py ${need_cuda[*]:-} ${pass[*]:-}"
rm -f "$OUT/torch_recurrent.json"
"$PYTHON" scripts/peers/torch_recurrent.py --out "$OUT/torch_recurrent.json" \
  ${need_cuda[@]+"${need_cuda[@]}"} ${pass[@]+"${pass[@]}"} 2>&1 | tee "$OUT/torch_recurrent.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

peer=()
if [ -s "$OUT/torch_recurrent.json" ]; then
  peer=(--peer "$OUT/torch_recurrent.json")
else
  echo "run_recurrent.sh: the peer wrote no results;" \
    "recurrent.lua runs without PyTorch's columns" >&2
fi

echo
echo "== engine: $ENGINE run scripts/bench/recurrent.lua ${peer[*]:-} ${pass[*]:-} ${ours[*]:-}"
"$ENGINE" run scripts/bench/recurrent.lua ${peer[@]+"${peer[@]}"} ${pass[@]+"${pass[@]}"} \
  ${ours[@]+"${ours[@]}"} 2>&1 \
  | tee "$OUT/recurrent.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo
echo "run_recurrent.sh: logs and results in $OUT (status $status)"
exit $status
