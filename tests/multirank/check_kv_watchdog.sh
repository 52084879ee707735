#!/usr/bin/env bash
# Usage: check_kv_watchdog.sh EXE MPIEXEC [MPIEXEC FLAGS...]
# KeyValueWatchdog.* on 2 ranks, the mpi backend under MPI_THREAD_SINGLE, SYNK_TIMEOUT=3: rank
# 1 sleeps past the deadline, so rank 0's watchdog ends the job (exit 124) with a line naming a
# KeyValue cycle: it named only an all_reduce(count 6, int64, max) the user never made.
set -uo pipefail
exe=$1
shift
fail() { echo "FAIL: $*"; exit 1; }
start=$(date +%s)
out=$(SYNK_KV_WATCHDOG_TEST=1 SYNK_TEST_MPI_THREAD=single SYNK_BACKEND=mpi SYNK_TIMEOUT=3 \
      SYNK_STALL_WARN=1 timeout -k 5 60 "$@" -np 2 "$exe" --gtest_filter='KeyValueWatchdog.*' 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out" | grep -v '^ \|^$' | head -30
echo "exit code $rc after ${elapsed} s"
[ "$rc" -ne 0 ] || fail "the job succeeded"
[ "$elapsed" -lt 18 ] || fail "the job took ${elapsed} s: the watchdog did not end it"
grep -q "warn: rank 0: a KeyValue cycle (its all_reduce(count 6, int64, max)) on the mpi \
backend has waited 1 s inside MPI (SYNK_STALL_WARN)" <<<"$out" || fail "no warning names the cycle"
grep -q "^synk Timeout: rank 0: a KeyValue cycle (its all_reduce(count 6, int64, max)) on the \
mpi backend has waited [0-9]* s inside MPI without progress" <<<"$out" ||
  fail "the watchdog's line does not name the cycle"
echo "PASS: the watchdog ended the job in ${elapsed} s, naming the KeyValue cycle"
