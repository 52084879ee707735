#!/bin/sh
# Configures a fresh build of synk with -DSYNK_WITH_NCCL=OFF and builds the library alone, then
# checks that the result has no NCCL backend: the configure line says so, libsynk does not link
# libnccl or libcudart, and no NCCL symbol is referenced.
# Usage: build_without_nccl.sh <cmake> <source dir> <build dir>
set -eu
cmake="$1"
src="$2"
build="$3"
rm -rf "$build"
"$cmake" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSYNK_WITH_NCCL=OFF \
  -DSYNK_BUILD_TESTS=OFF -DSYNK_BUILD_BENCHMARKS=OFF -DSYNK_BUILD_EXAMPLES=OFF > "$build.log" 2>&1 ||
  { cat "$build.log"; exit 1; }
grep -q "NCCL backend OFF" "$build.log" || { cat "$build.log"; echo "configure did not report 'NCCL backend OFF'"; exit 1; }
"$cmake" --build "$build" -j2 --target synk
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
echo "libsynk built without NCCL: $lib"
rm -rf "$build" "$build.log"
