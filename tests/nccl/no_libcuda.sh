#!/usr/bin/env bash
# A CPU program loads no libcuda, on a GPU node too: train_fmnist (CPU, SYNK_BACKEND=auto, which
# routes by memory kind) on one rank, with the dynamic loader's log of every library it opens.
# libcuda is the driver: loading it is the first step of a CUDA context, so a CPU run must not.
# Where libcuda is not installed (CI) it passes trivially; the GPU machine's check runs it there.
# Usage: no_libcuda.sh MPIEXEC TRAIN_FMNIST
set -euo pipefail
mpiexec=$1 train=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# -x passes LD_DEBUG to the rank alone: mpirun and its daemon are not synk's to judge.
"$mpiexec" --oversubscribe --allow-run-as-root -np 1 -x SYNK_BACKEND=auto -x LD_DEBUG=files \
  -x LD_DEBUG_OUTPUT="$work/ld" "$train" --epochs 1 --limit 512 > "$work/out.txt" 2>&1 ||
  { cat "$work/out.txt"; exit 1; }
tail -n 1 "$work/out.txt"
logs=("$work"/ld.*)
[ -e "${logs[0]}" ] || { echo "FAILED: the loader wrote no log"; exit 1; }
opened=$(grep -h "file=" "${logs[@]}" | grep -c . || true)
echo "the rank opened $opened libraries"
# A request shows as "file=libcuda.so.1 ... dynamically loaded by X" whether or not it is
# found; a load that happened runs the library's init.
grep -h "file=libcuda\.so.*loaded by" "${logs[@]}" | sed 's/^ *[0-9]*:\s*/asked: /' || true
if grep -h "calling init: .*/libcuda\.so" "${logs[@]}"; then
  echo "FAILED: the CPU run loaded libcuda (the 'asked' lines say which library wanted it)"
  exit 1
fi
if ldconfig -p 2>/dev/null | grep -q "libcuda\.so\.1 "; then
  echo "libcuda is installed here and was not loaded"
else
  echo "libcuda is not installed here: nothing to load (the GPU machine's check tells more)"
fi
