#!/usr/bin/env bash
# Installs the Debian packages engine builds against. Safe to run twice:
# packages already present are skipped, and apt is only touched when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  luajit libluajit-5.1-dev   # the Lua host and the C API we embed
  libcriterion-dev           # the test framework (run by ctest)
  libstb-dev                 # stb headers (image writing for plots)
  libopenblas-dev            # CPU matmul for f32/f64
  libreadline-dev            # REPL line editing and history
  libjansson-dev             # JSON: safetensors headers, traces
  libomp-dev                 # OpenMP runtime headers (gcc uses libgomp; harmless with clang)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
