#!/usr/bin/env bash
# train_fmnist --overlap (each layer's gradient through synk::KeyValue as backprop makes it, its
# update applied before the layer's next forward) makes the same updates as one all_reduce per
# step: one epoch on 2 ranks with and without it gives the same training loss and test accuracy
# within 1e-5 relative. Twice: sgd on the whole training set, and adam on 5000 images (a short
# last batch), also on the mpi backend. And a loss that is not finite stops both at the same
# step with the same line.
# Usage: overlap.sh SYNKRUN TRAIN_FMNIST
set -euo pipefail
synkrun=$1 train=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {  # run NAME [train_fmnist args...]
  local name=$1
  shift
  "$synkrun" --timeout 100 -np 2 "$train" --epochs 1 --seed 7 --json "$work/$name.json" "$@" \
    > "$work/$name.txt" 2>&1 || {
    cat "$work/$name.txt"
    echo "FAILED: $name: $*"
    exit 1
  }
  tail -n 1 "$work/$name.txt"
}
run sgd
run sgd_overlap --overlap
run adam --optimizer adam --limit 5000
run adam_overlap --optimizer adam --limit 5000 --overlap
run adam_mpi_overlap --optimizer adam --limit 5000 --overlap --backend mpi
grep -q "gradients overlapped layer by layer" "$work/sgd_overlap.txt"

# A loss that becomes NaN or infinite stops both at the same step, with the same line (exit 3),
# and no rank is left waiting in the KeyValue.
diverge() {  # diverge NAME [args...]: the run's one line on stderr
  local name=$1 rc=0
  shift
  "$synkrun" --timeout 60 -np 2 "$train" --limit 1024 --batch 4 --lr 10 --schedule constant \
    --seed 7 --epochs 1 "$@" > "$work/$name.txt" 2>&1 || rc=$?
  [ "$rc" -eq 3 ] || { cat "$work/$name.txt"; echo "FAILED: $name: exit $rc, expected 3"; exit 1; }
  grep "the training loss is" "$work/$name.txt"
}
[ "$(diverge nonfinite)" = "$(diverge nonfinite_overlap --overlap)" ] || {
  cat "$work/nonfinite.txt" "$work/nonfinite_overlap.txt"
  echo "FAILED: --overlap stops elsewhere"
  exit 1
}
echo "ok: both stop with: $(grep "the training loss is" "$work/nonfinite.txt")"

python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
ok = True
for ref, name in (("sgd", "sgd_overlap"), ("adam", "adam_overlap"), ("adam", "adam_mpi_overlap")):
    a, b = (json.load(open(f"{work}/{n}.json"))[0] for n in (ref, name))
    rel = abs(b["train_loss"] - a["train_loss"]) / abs(a["train_loss"])
    dacc = abs(b["test_accuracy"] - a["test_accuracy"])
    print(f"{name:17s} train_loss {b['train_loss']:.8f} vs {a['train_loss']:.8f} ({ref}): "
          f"rel diff {rel:.2e}; test_acc {b['test_accuracy']:.4f} vs {a['test_accuracy']:.4f}")
    if rel > 1e-5 or dacc > 1e-5:
        ok = False
        print("  DISAGREES")
sys.exit(0 if ok else 1)
PY
echo "overlap passed"
