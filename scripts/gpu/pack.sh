#!/usr/bin/env bash
# Builds for the GPU machine and packs what runs there into gpu-pack/pack.tar.xz (git-ignored):
# the build folder without objects, plus the shared libraries it needs (../shared/tools/bundle-libs).
# The GPU machine lacks our Debian libraries and the carry limit is 64 MiB, hence the packing.
# Then, with the device tool: carry gpu-pack, command `bash scripts/gpu/run.sh [what]`.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build-gpu
cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build $BUILD -j"$(nproc)"
rm -rf gpu-libs gpu-pack
../shared/tools/bundle-libs gpu-libs $BUILD/engine $BUILD/engine.so $BUILD/libengine.so \
  $BUILD/embed_example $BUILD/tests/test_* >/dev/null
rm -f gpu-libs/libengine.so*  # the build's own copy is found through its RUNPATH
strip --strip-debug $BUILD/engine $BUILD/engine.so "$(readlink -f $BUILD/libengine.so)"
cp "$(readlink -f "$(command -v luajit)")" gpu-libs/luajit  # the tests load engine.so into plain luajit
mkdir -p gpu-pack
# engine, engine.so and libengine.so each hold the same ~60 MB of kernels: one xz stream with a
# dictionary larger than that stores them once (threaded xz splits blocks and stores each copy).
tar -cf - --exclude='*.o' --exclude='*.a' --exclude='*.d' $BUILD gpu-libs |
  xz -2 --lzma2=preset=2,dict=192MiB > gpu-pack/pack.tar.xz
echo "packed: $(du -h gpu-pack/pack.tar.xz | cut -f1) (build $(pwd)/$BUILD)"
