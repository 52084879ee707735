#!/usr/bin/env bash
# A CPU program on a GPU node makes no CUDA context: train_fmnist (CPU, SYNK_BACKEND=auto, which
# routes by memory) on 2 ranks under the fake CUDA device, which counts the runtime calls that
# would make a context on a real device (cudaSetDevice, cudaMalloc, streams, copies, pointer
# attributes) and the driver's pointer queries the routing makes. Every rank: no context call.
# Usage: no_context.sh MPIEXEC TRAIN_FMNIST FAKE_CUDA_DEVICE_LIB
set -euo pipefail
mpiexec=$1 train=$2 fake=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$mpiexec" --oversubscribe --allow-run-as-root -np 2 -x LD_PRELOAD="$fake" \
  -x SYNK_FAKE_REPORT="$work/report" -x SYNK_TEST_FAKE_CUDA=1 \
  "$train" --epochs 1 --limit 512 > "$work/out.txt" 2>&1 || { cat "$work/out.txt"; exit 1; }
tail -n 1 "$work/out.txt"
reports=("$work"/report.*)
[ "${#reports[@]}" -eq 2 ] || { echo "FAILED: ${#reports[@]} reports, expected 2"; exit 1; }
for r in "${reports[@]}"; do
  cat "$r"
  grep -qx "context_calls 0" "$r" || { echo "FAILED: a CUDA context call in $r"; exit 1; }
  # The fake is preloaded, so the routing finds its cuPointerGetAttribute and asks it.
  grep -q "^pointer_queries [1-9]" "$r" || { echo "FAILED: the routing asked nothing"; exit 1; }
done
echo "no CUDA context made"
