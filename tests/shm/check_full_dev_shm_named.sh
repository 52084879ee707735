#!/usr/bin/env bash
# Usage: check_full_dev_shm_named.sh HOST_PROBE MPIEXEC [MPIEXEC FLAGS...]
# Named segments (SYNK_SHM_SEGMENTS=named) in a /dev/shm too small for them (512 KiB, in a mount
# namespace of its own), 4 ranks on 2 simulated nodes (hier): each node's first rank fails to
# make its node's segment, and its error names it as the job numbers it (rank 2 for the second
# node, whose first rank is its local rank 0), with the hint to look at /dev/shm. Skipped (exit
# 77) where a mount namespace cannot be made (not root).
set -uo pipefail
probe=$1
shift
if ! unshare --mount true 2>/dev/null; then
  echo "SKIP: unshare --mount is not allowed here (needs root)"
  exit 77
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# shellcheck disable=SC2016  # expanded by the inner shell
unshare --mount bash -c '
  mount -t tmpfs -o size=512k,mode=1777 tmpfs /dev/shm ||
    { echo "SKIP: cannot mount a tmpfs"; exit 77; }
  probe=$1
  shift
  SYNK_SHM_SEGMENTS=named SYNK_SIMULATE_NODES=2 timeout -k 5 60 "$@" \
    --mca btl_vader_backing_directory /tmp -np 4 "$probe" allreduce 10
' check_full_dev_shm_named "$probe" "$@" > "$out" 2>&1
rc=$?
[ "$rc" = 77 ] && { cat "$out"; exit 77; }
cat "$out"
if [ "$rc" = 0 ]; then
  echo "FAIL: the job succeeded with named segments in a 512 KiB /dev/shm"
  exit 1
fi
for r in 0 2; do
  grep -q "shm backend: rank $r could not create the shared segment: .*/dev/shm may be too small" \
    "$out" || { echo "FAIL: no error naming rank $r, its node's first rank"; exit 1; }
done
echo "PASS: each node's first rank is named by its rank in the job"
