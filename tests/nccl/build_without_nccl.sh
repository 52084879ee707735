#!/bin/sh
# Configures a fresh build of synk with -DSYNK_WITH_NCCL=OFF, as a machine without CUDA builds
# it, and builds the library and the main job, train_fmnist; then checks that the result has no
# NCCL backend (the configure line says so, libsynk does not link libnccl or libcudart, and no
# NCCL symbol is referenced), that train_fmnist trains on the CPU, and that --device cuda says
# why it cannot (exit 2).
# Usage: build_without_nccl.sh <cmake> <source dir> <build dir>
set -eu
cmake="$1"
src="$2"
build="$3"
rm -rf "$build"
"$cmake" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSYNK_WITH_NCCL=OFF \
  -DSYNK_BUILD_TESTS=OFF -DSYNK_BUILD_BENCHMARKS=OFF -DSYNK_BUILD_EXAMPLES=ON > "$build.log" 2>&1 ||
  { cat "$build.log"; exit 1; }
grep -q "NCCL backend OFF" "$build.log" || { cat "$build.log"; echo "configure did not report 'NCCL backend OFF'"; exit 1; }
"$cmake" --build "$build" -j2 --target synk train_fmnist
lib=$(find "$build" -name 'libsynk.so*' -type f | head -n 1)
[ -n "$lib" ] || { echo "no libsynk.so in $build"; exit 1; }
if ldd "$lib" | grep -E 'libnccl|libcudart'; then
  echo "$lib links CUDA or NCCL although SYNK_WITH_NCCL=OFF"; exit 1
fi
if nm -D "$lib" | grep -E ' U (nccl|cuda)'; then
  echo "$lib references NCCL or CUDA symbols although SYNK_WITH_NCCL=OFF"; exit 1
fi
grep -q "define SYNK_BUILT_WITH_NCCL 0" "$build/include/synk/version.h" ||
  { echo "version.h does not say SYNK_BUILT_WITH_NCCL 0"; exit 1; }
train="$build/bin/train_fmnist"
if [ -d /usr/share/datasets/fashion-mnist ]; then
  "$train" --epochs 1 --limit 512 > "$build.train" 2>&1 || { cat "$build.train"; exit 1; }
  grep -q "test_acc" "$build.train" ||
    { cat "$build.train"; echo "train_fmnist printed no epoch"; exit 1; }
fi
rc=0
"$train" --device cuda --epochs 1 --limit 512 > "$build.train" 2>&1 || rc=$?
if [ "$rc" -ne 2 ] || ! grep -qE "this build has no (NCCL backend|CUDA path)" "$build.train"; then
  cat "$build.train"; echo "--device cuda without CUDA: exit $rc, not 2 with the reason"; exit 1
fi
echo "libsynk built without NCCL: $lib; train_fmnist trains on the CPU"
rm -rf "$build" "$build.log" "$build.train"
