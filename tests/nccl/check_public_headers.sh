#!/bin/sh
# Fails when a public header of libsynk includes a CUDA or NCCL header: users of synk must be
# able to compile against it without the CUDA toolkit.
set -u
dir="$1"
found=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](cuda|nccl|cublas|curand|cuda_runtime|driver_types)[^>"]*[>"]' "$dir")
if [ -n "$found" ]; then
  echo "CUDA/NCCL includes in public headers:"
  echo "$found"
  exit 1
fi
echo "no CUDA or NCCL include in $dir ($(find "$dir" -name '*.h*' | wc -l) headers)"
