#!/usr/bin/env bash
# train_fmnist --device cuda against the CPU run: one epoch of sgd and one of adam (5000 images:
# a short last batch) on one rank, the same seed; the training losses agree to 1e-3 and the test
# accuracies to 0.01 (float sums in other orders, on the GPU). Where no CUDA device is visible,
# or the build has no CUDA path, the GPU run must fail with exit 2 saying so, and the test is
# skipped (exit 77) with that reason.
# Usage: device_cuda.sh SYNKRUN TRAIN_FMNIST
set -euo pipefail
synkrun=$1 train=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {  # run NAME [train_fmnist args...]: exit code in $rc
  local name=$1
  shift
  rc=0
  "$synkrun" --timeout 200 -np 1 "$train" --epochs 1 --seed 3 --json "$work/$name.json" "$@" \
    > "$work/$name.txt" 2>&1 || rc=$?
}

run gpu_sgd --device cuda
if [ "$rc" -eq 2 ]; then
  if grep -q "no CUDA device is visible\|this build has no CUDA path" "$work/gpu_sgd.txt"; then
    echo "skipped: $(grep -m1 "train_fmnist:" "$work/gpu_sgd.txt")"
    exit 77
  fi
fi
[ "$rc" -eq 0 ] || { cat "$work/gpu_sgd.txt"; echo "FAILED: --device cuda exit $rc"; exit 1; }
grep -q "on the GPU (gradients through nccl)" "$work/gpu_sgd.txt"
run cpu_sgd
[ "$rc" -eq 0 ] || { cat "$work/cpu_sgd.txt"; exit 1; }
run gpu_adam --device cuda --optimizer adam --limit 5000
[ "$rc" -eq 0 ] || { cat "$work/gpu_adam.txt"; exit 1; }
run cpu_adam --optimizer adam --limit 5000
[ "$rc" -eq 0 ] || { cat "$work/cpu_adam.txt"; exit 1; }
cat "$work"/*.txt | grep "epoch   1"

python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
for opt in ("sgd", "adam"):
    gpu = json.load(open(f"{work}/gpu_{opt}.json"))[0]
    cpu = json.load(open(f"{work}/cpu_{opt}.json"))[0]
    dl = abs(gpu["train_loss"] - cpu["train_loss"])
    da = abs(gpu["test_accuracy"] - cpu["test_accuracy"])
    print(f"{opt}: train_loss gpu {gpu['train_loss']:.6f} cpu {cpu['train_loss']:.6f} "
          f"(|diff| {dl:.2e}); test_accuracy gpu {gpu['test_accuracy']:.4f} "
          f"cpu {cpu['test_accuracy']:.4f}; epoch {gpu['seconds']:.3f} s on the GPU, "
          f"{cpu['seconds']:.3f} s on the CPU")
    assert dl <= 1e-3, f"{opt}: the losses differ by {dl}"
    assert da <= 0.01, f"{opt}: the test accuracies differ by {da}"
PY
echo "device_cuda passed"
