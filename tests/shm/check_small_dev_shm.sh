#!/usr/bin/env bash
# Usage: check_small_dev_shm.sh RANKS "EXE..." MPIEXEC [MPIEXEC FLAGS...]
# Runs each multi-rank test binary EXE on RANKS ranks with the shm backend while /dev/shm is a
# 1 MiB tmpfs (in a mount namespace of its own, as a container's small /dev/shm: Docker's is
# 64 MiB), far smaller than the shm group's segment (about 6.6 MB on 2 ranks), node buffers and
# Data: synk's segments are anonymous (memfd) and must not need /dev/shm. Open MPI's own shared
# memory goes to /tmp (btl_vader_backing_directory). Skipped (exit 77) where a mount namespace
# cannot be made (not root).
set -uo pipefail
ranks=$1 exes=$2
shift 2

if ! unshare --mount true 2>/dev/null; then
  echo "SKIP: unshare --mount is not allowed here (needs root)"
  exit 77
fi
# shellcheck disable=SC2016  # expanded by the inner shell
unshare --mount bash -c '
  mount -t tmpfs -o size=1m,mode=1777 tmpfs /dev/shm || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
  df -h /dev/shm | tail -1
  ranks=$1 exes=$2
  shift 2
  for exe in $exes; do
    echo "-- $(basename "$exe") on $ranks ranks, /dev/shm 1 MiB"
    SYNK_BACKEND=shm timeout -k 5 100 "$@" --mca btl_vader_backing_directory /tmp \
      -np "$ranks" "$exe" ||
      { echo "FAIL: $(basename "$exe") failed with a 1 MiB /dev/shm"; exit 1; }
  done
  echo "PASS: every binary ran with a 1 MiB /dev/shm"
' check_small_dev_shm "$ranks" "$exes" "$@"
