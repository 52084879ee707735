#!/usr/bin/env bash
# examples/push_pull on 2 ranks: the sums of the push/pull part (key 3: 3 in every element, key
# 7: 30, the pull's callback run) and, on every rank, the same owners and the same weights after
# 2 SGD steps on the owners ({0.4 1.4 2.4} and five -0.4).
# Usage: push_pull.sh SYNKRUN PUSH_PULL
set -euo pipefail
synkrun=$1 program=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
"$synkrun" --timeout 60 -np 2 "$program" > "$out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { cat "$out"; echo "FAILED: exit $rc"; exit 1; }
cat "$out"
fail() { echo "FAILED: $1"; exit 1; }
grep -qx "push_pull: 2 rank(s)" "$out" || fail "no header line"
grep -qx "key 3 (4 floats, rank+1 from each rank): pulled 3 3 3 3 (expected 3)" "$out" ||
  fail "key 3"
grep -qx "key 7 (2 floats, 10\*(rank+1) from each rank): pulled 30 30 (expected 30); pull callback ran: yes" \
  "$out" || fail "key 7"
weights='owner(10) = [01], owner(11) = [01]; after 2 steps key 10 = {0.4 1.4 2.4}, '
weights+='key 11 = {-0.4 -0.4 -0.4 -0.4 -0.4} (as expected)$'
for r in 0 1; do grep -q "^rank $r: $weights" "$out" || fail "rank $r's weights"; done
# The owners too are the same on every rank.
[ "$(grep '^rank [01]: ' "$out" | sed 's/^rank [01]: //' | sort -u | wc -l)" -eq 1 ] ||
  fail "the ranks differ"
echo "push_pull passed"
