#!/usr/bin/env bash
# Usage: check_leader_slow.sh EXE SHIM MPIEXEC [MPIEXEC FLAGS...] (leader_fail_test.cc)
# A node leader's part between the nodes outlasts SYNK_TIMEOUT (2 s) while each of its chunks is
# quick (10 chunks of 10 elements, 0.5 s each, slow_allreduce.c on world rank 0): every rank must
# return, where rank 1, on that leader's node, timed out waiting for it before.
set -uo pipefail
exe=$1 shim=$2
shift 2
vader=$(mktemp -d)
trap 'rm -rf "$vader"' EXIT
out=$(SYNK_BACKEND=auto SYNK_SIMULATE_NODES=2 SYNK_TIMEOUT=2 SYNK_MPI_MAX_CHUNK=10 \
        timeout -k 5 60 "$@" --mca btl_vader_backing_directory "$vader" \
        -x LD_PRELOAD="$shim" -x SYNK_TEST_SLOW_RANK=0 -x SYNK_TEST_SLOW_COUNT=10 \
        -x SYNK_TEST_SLOW_MS=500 -np 4 "$exe" 2>&1)
echo "$out"
pkill -f "^$exe" 2>/dev/null  # its ranks, not this script, which names it too
for r in 0 1 2 3; do
  echo "$out" | grep -q "^rank $r: returned after [4-9]\.[0-9] s" ||
    { echo "FAIL: rank $r did not return after the leaders' 5 s between the nodes"; exit 1; }
done
echo "every rank waited out its leader's 5 s between the nodes, SYNK_TIMEOUT 2 s a chunk"
