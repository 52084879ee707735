#!/usr/bin/env bash
# A run whose loss becomes NaN or infinite (sgd at --lr 10 on global batches of 4 diverges within
# a few steps) stops at that step on every rank, on both backends: exit 3, one line from rank 0
# naming the epoch, the step and the loss, no epoch line, an empty --json list, and no rank left
# waiting in a collective (synkrun's --timeout would end the job with 124). Before, the run went
# on with a nan loss and exited 0.
# Usage: nonfinite.sh SYNKRUN TRAIN_FMNIST
set -euo pipefail
synkrun=$1 train=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
line='^train_fmnist: the training loss is \(nan\|inf\) at epoch 1, step [0-9]* of 256 '
line+='(learning rate 10); stopped: try a lower --lr$'

for backend in shm mpi; do
  set +e
  "$synkrun" --timeout 60 -np 2 "$train" --backend "$backend" --limit 1024 --batch 4 --lr 10 \
    --schedule constant --seed 7 --epochs 1 --json "$work/$backend.json" \
    > "$work/out" 2> "$work/err"
  rc=$?
  set -e
  fail() { echo "FAILED ($backend, exit $rc): $1"; cat "$work/out" "$work/err"; exit 1; }
  [ "$rc" -eq 3 ] || fail "exit $rc, expected 3"
  [ "$(grep -c "$line" "$work/err")" -eq 1 ] || fail "not one line matching: $line"
  [ "$(grep -c "the training loss" "$work/err")" -eq 1 ] || fail "more than rank 0 spoke"
  if grep -q "train_loss" "$work/out"; then fail "an epoch line"; fi
  [ "$(tr -d ' \n' < "$work/$backend.json")" = "[]" ] || fail "--json is not []"
  echo "ok ($backend): $(grep "$line" "$work/err")"
done
echo "nonfinite passed"
