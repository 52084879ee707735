#!/usr/bin/env bash
# Usage: check_mpi_stall.sh MODE BACKEND EXE MPIEXEC [MPIEXEC FLAGS...]
# (create, split, data, start: one rank never makes the communicator, never splits it, never
# sets a Data's value, or never starts MPI; mpi_stall_test.cc)
# Two ranks, SYNK_TIMEOUT=2, SYNK_MPI_MAX_CHUNK=1 (mpi_stall_test.cc). stall, reject: one rank
# never joins; the job must end well within the limit, rank 0's watchdog naming its call (before,
# rank 0 waited inside MPI for ever). progress: one call of 32 Mi chunks outlasts the deadline
# while making progress, and must run to its end.
set -uo pipefail
mode=$1 backend=$2 exe=$3
shift 3
# Open MPI's own shared memory goes to a directory removed at the end: mpirun kills the sleeping
# rank, which leaves its segment behind.
vader=$(mktemp -d)
trap 'rm -rf "$vader"' EXIT
start=$(date +%s)
out=$(SYNK_TIMEOUT=2 SYNK_STALL_WARN=1 SYNK_MPI_MAX_CHUNK=1 timeout -k 5 60 "$@" \
        --mca btl_vader_backing_directory "$vader" -np 2 "$exe" "$mode" "$backend" 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out"
echo "exit code $rc after ${elapsed} s"
# Whatever happened, no rank of it stays behind.
pkill -f "$exe $mode" 2>/dev/null
if [ "$mode" = progress ]; then
  [ "$rc" -eq 0 ] || { echo "FAIL: a call that kept making progress was ended"; exit 1; }
  # The call must have outlasted the deadline and its grace (2 + 2 s), or this proves nothing.
  n=$(echo "$out" | grep -c "one all_reduce took \([5-9]\|[1-9][0-9]\)\.[0-9] s, v\[last\] = 2$")
  [ "$n" -eq 2 ] || { echo "FAIL: the calls did not both take 5 s or more with the right sum"; exit 1; }
  echo "a long call that made progress ran to its end"
  exit 0
fi
[ "$elapsed" -lt 40 ] || { echo "FAIL: the job did not end within 40 s"; exit 1; }
[ "$rc" -ne 0 ] || { echo "FAIL: the job exited 0"; exit 1; }
call='all_reduce(count 1, float32, sum)'
if [ "$mode" = create ] || [ "$mode" = split ] || [ "$mode" = data ] || [ "$mode" = start ]; then
  # A step every rank takes together, which waited for ever: the watchdog ends it after
  # SYNK_TIMEOUT but at least 10 s (and a grace).
  step="making a communicator"
  [ "$mode" = split ] && step=split
  [ "$mode" = data ] && step=Data::set_value
  [ "$mode" = start ] && step="starting MPI (MPI_Init_thread)"
  want="synk Timeout: rank 0: $step has waited [0-9]* s inside MPI without progress, past its"
  want="$want deadline (10 s: SYNK_TIMEOUT, at least 10 s for such a step)"
  echo "$out" | grep -q "$want" || { echo "FAIL: no line matching: $want"; exit 1; }
  warn="rank 0: $step has waited [0-9]* s inside MPI (SYNK_STALL_WARN): some rank has not taken"
  echo "$out" | grep -q "$warn" || { echo "FAIL: no warning matching: $warn"; exit 1; }
  if echo "$out" | grep -q "was made\|split returned\|set_value returned"; then
    echo "FAIL: a step ended"; exit 1
  fi
  echo "the waiting rank ended the job"
  exit 0
fi
if [ "$mode" = vstall ]; then
  # auto on one node: shm, whose gatherv is routed first where libsynk was built with NCCL (the
  # watchdog's Timeout, there), else shm's own wait names the rank.
  routed="rank 0: gatherv(count 1, float32, root 0) on the auto (routing by memory) backend"
  want="synk Timeout: \($routed has waited [0-9]* s inside MPI without progress"
  want="$want\|gatherv: rank 0 waited 2 s (SYNK_TIMEOUT) for rank 1\)"
  echo "$out" | grep -q "$want" || { echo "FAIL: no line matching: $want"; exit 1; }
  if echo "$out" | grep -q "the call returned"; then echo "FAIL: a call returned"; exit 1; fi
  echo "the waiting rank ended the job"
  exit 0
fi
if [ "$backend" = shm ]; then
  # shm's own wait: a warning at SYNK_STALL_WARN, then an error naming the rank.
  warn="all_reduce: rank 0 has waited 1 s (SYNK_STALL_WARN) for rank 1, which has not reached this call; it fails after 2 s (SYNK_TIMEOUT)"
  want="synk Timeout: all_reduce: rank 0 waited 2 s (SYNK_TIMEOUT) for rank 1, which has not reached this call"
else
  warn="rank 0: $call on the $backend backend has waited [0-9]* s inside MPI (SYNK_STALL_WARN): some rank has not reached it; this process ends after SYNK_TIMEOUT (2 s)"
  want="synk Timeout: rank 0: $call on the $backend backend has waited [0-9]* s inside MPI without progress, past SYNK_TIMEOUT (2 s)"
fi
echo "$out" | grep -q "$want" || { echo "FAIL: no line matching: $want"; exit 1; }
# A non-blocking call run at issue (MPI below MPI_THREAD_MULTIPLE) says how the ranks met there;
# a blocking call does not.
at_issue="MPI runs below MPI_THREAD_MULTIPLE, so synk's non-blocking calls run when issued"
if [ "$mode" = iorder ]; then
  echo "$out" | grep -q "$at_issue" || { echo "FAIL: no line saying: $at_issue"; exit 1; }
elif echo "$out" | grep -q "$at_issue"; then
  echo "FAIL: a blocking call's Timeout speaks of non-blocking calls"; exit 1
fi
n=$(echo "$out" | grep -c "(SYNK_STALL_WARN)")
[ "$mode" = iorder ] && [ "$n" -eq 2 ] && n=1  # both ranks wait there
[ "$n" -eq 1 ] && echo "$out" | grep -q "$warn" ||
  { echo "FAIL: not one warning line (SYNK_STALL_WARN=1) matching: $warn"; exit 1; }
if echo "$out" | grep -q "the call returned"; then echo "FAIL: a call returned"; exit 1; fi
echo "the waiting rank ended the job"
