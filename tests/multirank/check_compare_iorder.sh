#!/usr/bin/env bash
# Usage: check_compare_iorder.sh BACKEND EXE MPIEXEC [MPIEXEC FLAGS...]
# Two ranks under MPI_Init issue non-blocking calls on two communicators in opposite orders
# (mpi_stall_test iorder), where the calls are compared first (hier, or SYNK_CHECK_CALLS=1 in
# the environment): they run at issue, so each rank waits in its first call for the other. Both
# ranks' Timeouts must say how the ranks met there (they said only that the other rank had not
# reached the call), and the job must end well within the limit.
set -uo pipefail
backend=$1 exe=$2
shift 2
# Open MPI's own shared memory goes to a directory removed at the end: the ranks abort.
vader=$(mktemp -d)
trap 'rm -rf "$vader"' EXIT
start=$SECONDS
out=$(SYNK_TIMEOUT=2 timeout -k 5 60 "$@" --mca btl_vader_backing_directory "$vader" -np 2 \
        "$exe" iorder "$backend" 2>&1)
rc=$?
echo "$out" | grep -v '^\[' | head -20
echo "exit code $rc after $((SECONDS - start)) s"
pkill -f "$exe iorder" 2>/dev/null
[ "$rc" -ne 0 ] && [ $((SECONDS - start)) -lt 40 ] ||
  { echo "FAIL: the job did not fail, or not within 40 s"; exit 1; }
# On hier the two comparisons may also pass (the calls are alike) and the ranks meet in MPI
# instead, where the watchdog's Timeout says the same; on shm they meet in the comparison.
want="MPI runs below MPI_THREAD_MULTIPLE, so synk's non-blocking calls run when issued"
[ "$backend" = shm ] && want="(the calls are compared first). $want"
n=$(echo "$out" | grep -cF "$want")
[ "$n" -ge 1 ] || { echo "FAIL: no Timeout saying: $want"; exit 1; }
echo "the Timeout says how the ranks met"
