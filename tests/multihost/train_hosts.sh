#!/usr/bin/env bash
# train_fmnist on 2 hosts x 1 rank (hier, through the bed's network) against one host with 2
# ranks (shm): one epoch, the same seed, the same training loss within 1e-4 relative.
# Usage: train_hosts.sh BIN_DIR
source "$(dirname "$0")/case_lib.sh"
bed_up hostA hostB
args=(--epochs 1 --seed 7)

echo "one host, 2 ranks"
run_job one_host 300 "$SYNKRUN" -np 2 "$BIN/train_fmnist" "${args[@]}" --json "$WORK/one_host.json"
expect_rc 0 "train_fmnist on one host"
echo "two hosts, 1 rank each"
run_job two_hosts 300 "$SYNKRUN" -H hostA:1,hostB:1 -x SYNK_LOG=info "$BIN/train_fmnist" \
  "${args[@]}" --json "$WORK/two_hosts.json"
expect_rc 0 "train_fmnist on two hosts"
expect_in "$WORK/two_hosts.out" "info: backend hier \(auto\) for 2 ranks on 2 nodes" "hier across hosts"
grep -h "^epoch" "$WORK/one_host.out" "$WORK/two_hosts.out"

python3 - "$WORK" <<'PY' || FAILED=1
import json, sys
work = sys.argv[1]
one = json.load(open(f"{work}/one_host.json"))[0]
two = json.load(open(f"{work}/two_hosts.json"))[0]
rel = abs(two["train_loss"] - one["train_loss"]) / abs(one["train_loss"])
print(f"train_loss: 1 host x 2 ranks {one['train_loss']:.8f}, 2 hosts x 1 rank "
      f"{two['train_loss']:.8f}, relative difference {rel:.2e}")
print(f"test_accuracy: {one['test_accuracy']:.4f} and {two['test_accuracy']:.4f}")
if rel > 1e-4:
    print("FAIL: the losses differ by more than 1e-4")
    sys.exit(1)
PY
expect_hosts_clean train_fmnist "after training"
case_end
