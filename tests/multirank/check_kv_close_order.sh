#!/usr/bin/env bash
# Usage: check_kv_close_order.sh EXE MPIEXEC [MPIEXEC FLAGS...]
# KeyValueCloseOrder.* on 2 ranks with SYNK_TIMEOUT=3: rank 0 closes KeyValue one then two, rank
# 1 two then one. The job must end well within the ctest limit (it hung: each close waited for
# the other rank's), a close saying why; the ranks may end in error after it.
set -uo pipefail
exe=$1
shift
fail() { echo "FAIL: $*"; exit 1; }
start=$(date +%s)
out=$(SYNK_KV_CLOSE_ORDER_TEST=1 SYNK_TIMEOUT=3 timeout -k 5 60 "$@" -np 2 "$exe" \
        --gtest_filter='KeyValueCloseOrder.*' 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out" | grep -v '^ \|^$' | head -30
echo "exit code $rc after ${elapsed} s"
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "the job did not end (exit $rc)"
[ "$elapsed" -lt 40 ] || fail "the job took ${elapsed} s"
grep -q "^rank [01] close: synk Timeout: KeyValue::close: some rank has not closed this KeyValue \
within 3 s (SYNK_TIMEOUT): every rank closes its KeyValues, in the same order" <<<"$out" ||
  fail "no close said why it failed"
echo "PASS: the job ended in ${elapsed} s, a close naming the cause"
