#!/usr/bin/env bash
# Usage: check_mpi_stall.sh MODE BACKEND EXE MPIEXEC [MPIEXEC FLAGS...]
# Two ranks, SYNK_TIMEOUT=2: one rank never joins (mpi_stall_test.cc). The job must end well
# within the limit, with rank 0's watchdog naming its call, and no rank left running. Before,
# rank 0 waited inside MPI for ever.
set -uo pipefail
mode=$1 backend=$2 exe=$3
shift 3
# Open MPI's own shared memory goes to a directory removed at the end: mpirun kills the sleeping
# rank, which leaves its segment behind.
vader=$(mktemp -d)
trap 'rm -rf "$vader"' EXIT
start=$(date +%s)
out=$(SYNK_TIMEOUT=2 timeout -k 5 60 "$@" --mca btl_vader_backing_directory "$vader" \
        -np 2 "$exe" "$mode" "$backend" 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out"
echo "exit code $rc after ${elapsed} s"
[ "$elapsed" -lt 40 ] || { echo "FAIL: the job did not end within 40 s"; exit 1; }
[ "$rc" -ne 0 ] || { echo "FAIL: the job exited 0"; exit 1; }
call='all_reduce(count 1, float32, sum)'
want="synk Timeout: rank 0: $call on the $backend backend has waited [0-9]* s inside MPI, past SYNK_TIMEOUT"
echo "$out" | grep -q "$want" || { echo "FAIL: no line matching: $want"; exit 1; }
if echo "$out" | grep -q "the call returned"; then echo "FAIL: a call returned"; exit 1; fi
if pgrep -f "$exe $mode" > /dev/null; then echo "FAIL: a rank is still running"; exit 1; fi
echo "the waiting rank ended the job"
