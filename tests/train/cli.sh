#!/usr/bin/env bash
# train_fmnist's command line and data errors, on one rank (no launcher): --help is exit 0;
# a bad argument, a missing file and a corrupt file are one-line errors with exit 2; a loss that
# is not finite is one with exit 3.
# Usage: cli.sh TRAIN_FMNIST
set -euo pipefail
train=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

expect() {  # expect CODE PATTERN ARGS...: exit code CODE, one stderr line matching PATTERN
  local code=$1 pattern=$2
  shift 2
  set +e
  "$train" "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  set -e
  if [ "$rc" -ne "$code" ]; then
    echo "exit $rc, expected $code: $*"
    cat "$work/out" "$work/err"
    exit 1
  fi
  if [ -n "$pattern" ]; then
    [ "$(wc -l < "$work/err")" -eq 1 ] || { echo "not one line: $*"; cat "$work/err"; exit 1; }
    grep -q -- "$pattern" "$work/err" || { echo "no '$pattern': $*"; cat "$work/err"; exit 1; }
  fi
  echo "ok: $* -> $rc $(cat "$work/err")"
}

expect 0 "" --help
grep -q -- "--epochs" "$work/out"
expect 2 "not expected: --bogus" --bogus
expect 2 "epochs" --epochs 0
expect 2 "batch" --batch x
expect 2 "backend" --backend nccl2
# nan passed CLI11's PositiveNumber (5 epochs of nan loss, exit 0); -1 wrapped as a seed
for lr in nan -1 0 11 abc; do
  expect 2 "the learning rate must be a number above 0 and at most 10, not $lr" --lr "$lr"
done
expect 2 "the seed must be a whole number" --seed -1
# nan passed CLI11's Range (an epoch of nan loss, exit 0); -1 wrapped to 2^64 - 1 (all images)
for m in nan inf -0.1 1 abc; do
  expect 2 "the momentum must be a number at least 0 and below 1, not $m" --momentum "$m"
done
for limit in -1 nan 1.5 1e3; do
  expect 2 "the limit must be a whole number of images (0 for all), not $limit" --limit "$limit"
done
# CLI::Range called 1.5 epochs "not in range 1 to 100000".
for e in nan 1.5 0 100001 -1; do
  expect 2 "the number of epochs must be a whole number from 1 to 100000, not $e" --epochs "$e"
done
for b in -1 0 2.5 1048577; do
  expect 2 "the batch must be a whole number from 1 to 1048576, not $b" --batch "$b"
done
expect 2 "$work/none/train-images-idx3-ubyte.gz: cannot open" --data "$work/none"
expect 2 "^train_fmnist: --data: give a directory, not an empty name" --data ""

# A data directory whose training images are cut short.
mkdir "$work/bad"
src=/usr/share/datasets/fashion-mnist
if [ -d "$src" ]; then
  cp "$src"/*.gz "$work/bad/"
  head -c 100000 "$src/train-images-idx3-ubyte.gz" > "$work/bad/train-images-idx3-ubyte.gz"
  expect 2 "$work/bad/train-images-idx3-ubyte.gz: truncated" --data "$work/bad" --epochs 1
  # Wrong magic in the test labels.
  printf '\x00\x00\x09\x01\x00\x00\x00\x01\x05' | gzip > "$work/bad/t10k-labels-idx1-ubyte.gz"
  cp "$src/train-images-idx3-ubyte.gz" "$work/bad/"
  expect 2 "$work/bad/t10k-labels-idx1-ubyte.gz: IDX element type 0x00000901" \
    --data "$work/bad" --limit 10
  # The bounds themselves are taken; a loss that is not finite stops the run (exit 3).
  expect 0 "" --limit 256 --epochs 1 --momentum 0 --lr 10 --schedule constant
  expect 3 "the training loss is \(nan\|inf\) at epoch 1, step [0-9]* of 256" \
    --limit 1024 --batch 4 --lr 10 --schedule constant --seed 7 --epochs 1
  # A --limit past the images is all of them, and a note says so.
  expect 0 "note: --limit 70000 is more than the 60000 training images: all are used" \
    --limit 70000 --epochs 1 --batch 60000 --lr 0.01
  # A --json file that cannot be written.
  expect 2 "cannot write --json file" --limit 256 --epochs 1 --json "$work/no/such/dir.json"
fi
echo "cli passed"
