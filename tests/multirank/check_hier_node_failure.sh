#!/usr/bin/env bash
# Usage: check_hier_node_failure.sh EXE MPIEXEC [MPIEXEC FLAGS...]
# Two simulated nodes of two ranks (hier backend); the second node's ranks run with /dev/shm a
# 1 MiB tmpfs (a mount namespace each) and SYNK_SHM_SEGMENTS=named, so their shm group's segment
# (about 6.6 MB) cannot be made, while the first node's can. Every rank must end with a
# synk::Error within the time limit: the second node's its own, the first node's Remote naming
# node 1. (Before, the first node's ranks waited in an MPI_Allgather for ever.) The second
# node's error names its first rank as the job numbers it, rank 2 (it said "rank 0", its local
# rank, which is the first node's). Open MPI's own shared memory goes to /tmp. Skipped (exit 77) where a mount namespace cannot be made (not root).
set -uo pipefail
exe=$1
shift

if ! unshare --mount true 2>/dev/null; then
  echo "SKIP: unshare --mount is not allowed here (needs root)"
  exit 77
fi
# shellcheck disable=SC2016  # expanded by each rank's shell
small_shm='mount -t tmpfs -o size=1m,mode=1777 tmpfs /dev/shm || exit 77; exec "$0"'
out=$(SYNK_SIMULATE_NODES=2 SYNK_BACKEND=auto timeout -k 5 60 "$@" \
        --mca btl_vader_backing_directory /tmp \
        -np 2 "$exe" : \
        -np 2 env SYNK_SHM_SEGMENTS=named unshare --mount bash -c "$small_shm" "$exe" 2>&1)
rc=$?
echo "$out"
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  echo "FAIL: the job did not end within 60 s (a node waited for the failed one)"
  exit 1
fi
fail=0
for r in 0 1; do
  if ! grep -qE "^rank $r after .* error Remote: .*hier backend: node 1 \(rank 2\) could not set up its shared memory: .*" <<<"$out"; then
    echo "FAIL: rank $r (node 0) did not report node 1's failure"
    fail=1
  fi
done
own="error System: .*shm backend: rank 2 could not create the shared segment: .*/dev/shm"
for r in 2 3; do
  if ! grep -qE "^rank $r after .* $own" <<<"$out"; then
    echo "FAIL: rank $r (node 1) did not report its own failure, naming rank 2"
    fail=1
  fi
done
[ $fail -eq 0 ] && echo "PASS: every rank of both nodes got an error (rc $rc)"
exit $fail
