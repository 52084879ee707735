#!/usr/bin/env bash
# Usage: check_leader_fail.sh EXE SHIM MPIEXEC [MPIEXEC FLAGS...] (leader_fail_test.cc)
set -uo pipefail
exe=$1 shim=$2
shift 2
vader=$(mktemp -d)
trap 'rm -rf "$vader"' EXIT
out=$(SYNK_BACKEND=auto SYNK_SIMULATE_NODES=2 SYNK_TIMEOUT=10 timeout -k 5 60 "$@" \
        --mca btl_vader_backing_directory "$vader" -x LD_PRELOAD="$shim" \
        -x SYNK_TEST_FAIL_RANK=0 -x SYNK_TEST_FAIL_COUNT=100 -np 4 "$exe" 2>&1)
echo "$out"
pkill -f "^$exe" 2>/dev/null  # its ranks, not this script, which names it too
echo "$out" | grep -q "^rank 0: failed after .*MPI_Allreduce failed" ||
  { echo "FAIL: rank 0 did not fail with its MPI error"; exit 1; }
line=$(echo "$out" | grep "^rank 1: ") || { echo "FAIL: no line from rank 1"; exit 1; }
want="^rank 1: failed after [0-4]\.[0-9] s: synk Remote: all_reduce: rank 0 failed:"
want+=" MPI_Allreduce failed"
echo "$line" | grep -q "$want" ||
  { echo "FAIL: rank 1 did not fail at once naming rank 0's MPI error"; exit 1; }
echo "rank 1 learned of its leader's failure at once"
