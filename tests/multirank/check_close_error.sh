#!/usr/bin/env bash
# Usage: check_close_error.sh MPIEXEC PROGRAM [MPIEXEC FLAGS...]
# close_error_test.cc on 2 ranks: the job must fail (exit status 1 where it was 0), and a rank
# must say what the close found.
set -uo pipefail
mpiexec=$1 program=$2
shift 2
out=$(timeout -k 5 50 "$mpiexec" "$@" -np 2 "$program" 2>&1)
rc=$?
echo "$out" | grep '^synk: rank'
echo "-- exit code $rc"
[ "$rc" = 1 ] || { echo "FAIL: exit code $rc, expected 1"; exit 1; }
# The rank that closes first may not have seen the other's call yet: one of them says it.
grep -q "^synk: rank [01]: .*mismatched calls: .*root 0.*root 1.* (found when the group closed: \
the process's exit status will be 1)" <<<"$out" || { echo "FAIL: no rank said why"; exit 1; }
echo "PASS: the mismatch found at close failed the job"
