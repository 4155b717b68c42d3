# Sourced by the benchmark drivers (run_ops.sh, run_recurrent.sh) from the repository root: ENGINE
# is $ENGINE, else `engine` on PATH, else build-gpu/engine; without one it says so, naming the
# caller ($1), and exits 1.
if [ -z "${ENGINE:-}" ]; then
  if command -v engine >/dev/null 2>&1; then
    ENGINE=$(command -v engine)
  elif [ -x build-gpu/engine ]; then
    ENGINE=build-gpu/engine
  else
    echo "$1: no engine binary: set ENGINE, put it on PATH, or build build-gpu/engine" >&2
    exit 1
  fi
fi
