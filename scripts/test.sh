#!/usr/bin/env bash
# Sets up, builds and runs every test: the normal build (CUDA parts compiled when nvcc is
# present; CUDA tests skip themselves without a GPU), then the CPU tests again under
# AddressSanitizer + UBSan. The last line is the combined "N passed, N failed" count.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh || exit 1
JOBS=${JOBS:-$(nproc)}

passed=0
failed=0
run_suite() { # name build-dir cmake-args...
  local name=$1 dir=$2
  shift 2
  echo "== $name: configure and build ($dir)"
  if ! cmake -S . -B "$dir" -G Ninja "$@" >"$dir/configure.log" 2>&1; then
    cat "$dir/configure.log"; failed=$((failed + 1)); return
  fi
  if ! cmake --build "$dir" -j"$JOBS"; then
    failed=$((failed + 1)); return
  fi
  echo "== $name: tests"
  local log="$dir/ctest.log"
  (cd "$dir" && ctest --output-on-failure -j"$JOBS" 2>&1 | tee ctest.log)
  local total fails
  total=$(grep -oE 'tests failed out of [0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  fails=$(grep -oE '[0-9]+ tests failed out of' "$log" | grep -oE '^[0-9]+' || echo 1)
  passed=$((passed + total - fails))
  failed=$((failed + fails))
}

mkdir -p build build-asan
run_suite "engine" build -DCMAKE_BUILD_TYPE=RelWithDebInfo
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_suite "engine under ASan+UBSan (CPU)" build-asan -DCMAKE_BUILD_TYPE=Debug -DENGINE_SANITIZE=ON

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
