#!/usr/bin/env bash
# Usage: check_install.sh BUILD_DIR OUTSIDE_SRC MPIEXEC
# An outside project must find synk after `cmake --install`, by CMake package and by pkg-config.
set -euo pipefail
build=$1 src=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/synk/synk.h include/synk/version.h lib/libsynk.so lib/cmake/synk/synkConfig.cmake \
         lib/pkgconfig/synk.pc; do
  [ -e "$prefix/$f" ] || { echo "missing after install: $f"; exit 1; }
done
if grep -rqE '#include *[<"](cuda|nccl)' "$prefix/include/synk"; then
  echo "a public header mentions CUDA or NCCL"; exit 1
fi
# The installed library finds what it links (CUDA and NCCL where built with them) by its RUNPATH,
# not through the loader's cache: a cluster's CUDA comes from a module, not /etc/ld.so.conf.
loader=$(readelf -l /bin/sh 2>/dev/null | sed -n 's/.*program interpreter: \(.*\)]/\1/p')
if [ -n "$loader" ] && ! "$loader" --inhibit-cache --list "$prefix/lib/libsynk.so" >"$work/ldd" 2>&1
then
  echo "the installed libsynk.so does not load without the loader's cache:"; cat "$work/ldd"; exit 1
fi

echo "== find_package(synk)"
cmake -S "$src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
"$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$work/cmake-build/outside"

echo "== pkg-config synk"
# synk.pc is relocatable (its prefix comes from ${pcfiledir}).
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs synk)
g++ -std=c++20 "$src/main.cc" -o "$work/outside-pc" $flags -Wl,-rpath,"$prefix/lib"
"$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$work/outside-pc"
echo "== the headers under a strict user's warnings"
# A program built with -Werror and every conversion warning must not fail in synk's headers.
strict="-std=c++20 -fsyntax-only -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow
        -Wold-style-cast -Werror"
printf '#include "synk/synk.h"\n#include "synk/drive_hook.h"\n' >"$work/headers.cc"
for cxx in g++ clang++; do
  command -v "$cxx" >/dev/null || continue
  $cxx $strict $(pkg-config --cflags synk) "$work/headers.cc" || {
    echo "synk's headers warn under $cxx"; exit 1; }
done
echo "install check passed"
