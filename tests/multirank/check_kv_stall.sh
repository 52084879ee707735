#!/usr/bin/env bash
# Usage: check_kv_stall.sh RANKS EXE MPIEXEC [MPIEXEC FLAGS...]
# KeyValueStall.ARankThatNeverPushes with SYNK_STALL_WARN=1 SYNK_TIMEOUT=3: rank 1 never pushes
# key 1. Exactly one warning line must name the key and rank 1 (after about 1 s), every rank
# must get the error naming them (the test asserts it), and the job must end well before the
# ctest limit with no process left.
set -uo pipefail
ranks=$1 exe=$2
shift 2
fail() { echo "FAIL: $*"; exit 1; }
start=$(date +%s)
out=$(SYNK_KV_STALL_TEST=1 SYNK_STALL_WARN=1 SYNK_TIMEOUT=3 timeout -k 5 60 "$@" -np "$ranks" \
        "$exe" --gtest_filter='KeyValueStall.*' 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out"
echo "exit code $rc after ${elapsed} s"
[ "$rc" -eq 0 ] || fail "the test failed (exit $rc)"
[ "$elapsed" -lt 30 ] || fail "the job took ${elapsed} s"
want="warn: KeyValue: key 1 has waited more than 1 s (SYNK_STALL_WARN): pushed by"
n=$(grep -cF "$want" <<<"$out")
[ "$n" -eq 1 ] || fail "$n warning lines, not 1: $want"
grep -F "$want" <<<"$out" | grep -qF "not yet by rank 1; it fails after 3 s (SYNK_TIMEOUT)" ||
  fail "the warning does not name rank 1"
n=$(grep -c "^rank [0-9]* error: synk Timeout: KeyValue: key 1 was pushed by" <<<"$out")
[ "$n" -eq "$ranks" ] || fail "$n ranks reported the error, not $ranks"
echo "PASS: one warning, then the error on all $ranks ranks, in ${elapsed} s"
