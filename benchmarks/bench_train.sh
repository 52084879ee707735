#!/bin/bash
# Data-parallel scaling of train_fmnist: EPOCHS epochs (default 3) on 1 rank and on 2 ranks,
# both through synkrun, and the median epoch time of each and the speedup of 2 ranks over 1.
# The epoch time is rank 0's clock over the epoch's training steps (one all_reduce per step;
# the test evaluation after the epoch is not in it). With REPEATS > 1 the two runs alternate
# REPEATS times and the medians are over all their epochs, which steadies a shared machine.
# Usage: benchmarks/bench_train.sh [path/to/bin] [epochs] [repeats] [extra train_fmnist args...]
# SYNKRUN_ARGS: options for synkrun (e.g. "--bind core" on a node with fewer GPUs than ranks).
# A run that fails ends the script with its exit code.
set -euo pipefail
bin=${1:-$(dirname "$0")/../build/bin}
epochs=${2:-3}
repeats=${3:-1}
shift $(($# < 3 ? $# : 3))
source "$(dirname "$0")/require_tools.sh"
require_tools "$bin" synkrun train_fmnist
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for ((r = 1; r <= repeats; r++)); do
  for np in 1 2; do
    echo "# synkrun -np $np train_fmnist --epochs $epochs $*"
    "$bin/synkrun" ${SYNKRUN_ARGS:-} -np "$np" "$bin/train_fmnist" --epochs "$epochs" \
      --json "$work/np$np.$r.json" "$@" | sed 's/^/  /'
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$work" "$repeats" <<'PY'
import json, statistics, sys
work, repeats = sys.argv[1], int(sys.argv[2])
med = {}
for np in (1, 2):
    recs = [r for i in range(1, repeats + 1) for r in json.load(open(f"{work}/np{np}.{i}.json"))]
    med[np] = statistics.median(r["seconds"] for r in recs)
    ips = statistics.median(r["images_per_s"] for r in recs)
    print(f"-np {np}: median epoch {med[np]:.3f} s over {len(recs)} epochs, {ips:.0f} images/s, "
          f"last test accuracy {recs[-1]['test_accuracy']:.4f}")
print(f"speedup of -np 2 over -np 1 (median epoch time): {med[1] / med[2]:.2f}")
PY
