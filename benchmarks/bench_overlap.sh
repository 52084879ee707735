#!/bin/bash
# train_fmnist with and without --overlap (each layer's gradient pushed through synk::KeyValue as
# backprop makes it, waited for before the layer's next forward, instead of one all_reduce per
# step) on 1 and 2 ranks: EPOCHS epochs per run (default 3), the four runs alternating REPEATS
# times (default 2), and the median epoch time of each over all its epochs but each run's first
# (on 2 ranks here the first epoch takes up to twice the next: warm-up, whichever the mode; with
# EPOCHS 1 that one is all there is). The
# epoch time is rank 0's clock over the training steps (the test evaluation after it is not in it).
# Usage: benchmarks/bench_overlap.sh [path/to/bin] [epochs] [repeats] [extra train_fmnist args...]
# SYNKRUN_ARGS: options for synkrun (e.g. "--bind core" on a node with fewer GPUs than ranks).
# A run that fails ends the script with its exit code.
set -euo pipefail
bin=${1:-$(dirname "$0")/../build/bin}
epochs=${2:-3}
repeats=${3:-2}
shift $(($# < 3 ? $# : 3))
source "$(dirname "$0")/require_tools.sh"
require_tools "$bin" synkrun train_fmnist
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for ((r = 1; r <= repeats; r++)); do
  for np in 1 2; do
    for mode in plain overlap; do
      flag=()
      [ "$mode" = overlap ] && flag=(--overlap)
      echo "# synkrun -np $np train_fmnist --epochs $epochs ${flag[*]} $*"
      "$bin/synkrun" ${SYNKRUN_ARGS:-} -np "$np" "$bin/train_fmnist" --epochs "$epochs" "${flag[@]}" \
        --json "$work/np$np.$mode.$r.json" "$@" | sed 's/^/  /'
    done
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$work" "$repeats" <<'PY'
import json, statistics, sys
work, repeats = sys.argv[1], int(sys.argv[2])
print(f"{'ranks':>5}  {'mode':<9} {'epoch(s)':>9} {'images/s':>9} {'vs plain':>9} "
      f"{'train_loss':>11} {'epochs':>6}")
for np in (1, 2):
    plain = None
    for mode in ("plain", "overlap"):
        runs = [json.load(open(f"{work}/np{np}.{mode}.{i}.json")) for i in range(1, repeats + 1)]
        recs = [r for run in runs for r in (run[1:] if len(run) > 1 else run)]
        med = statistics.median(r["seconds"] for r in recs)
        ips = statistics.median(r["images_per_s"] for r in recs)
        plain = plain or med
        print(f"{np:>5}  {mode:<9} {med:9.3f} {ips:9.0f} {plain / med:8.2f}x "
              f"{recs[-1]['train_loss']:11.6f} {len(recs):6d}")
PY
