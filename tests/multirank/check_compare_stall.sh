#!/usr/bin/env bash
# Usage: check_compare_stall.sh RANKS BACKEND WANT_BACKEND STUCK EXE MPIEXEC [MPIEXEC FLAGS...]
# mpi_stall_test compare on RANKS ranks with SYNK_TIMEOUT=2, where the calls are compared first
# (SYNK_CHECK_CALLS=1, or the hier backend): the ranks in STUCK ("2" or "1,3") never reach the
# second call. Every other rank must warn at SYNK_STALL_WARN=1 and print exactly one Timeout,
# both naming those ranks and their nodes (before: "some rank has not", and no warning), its
# next call must fail at once, and the job must end well within the limit.
set -uo pipefail
ranks=$1 backend=$2 want_backend=$3 stuck=$4 exe=$5
shift 5
fail() { echo "FAIL: $*"; exit 1; }
# Open MPI's own shared memory goes to a directory removed at the end: mpirun kills the sleeping
# ranks, which leave their segments behind.
vader=$(mktemp -d)
trap 'rm -rf "$vader"' EXIT
start=$(date +%s)
out=$(SYNK_TIMEOUT=2 SYNK_STALL_WARN=1 timeout -k 5 60 "$@" \
        --mca btl_vader_backing_directory "$vader" \
        -np "$ranks" "$exe" compare "$backend" "$stuck" 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out"
echo "exit code $rc after ${elapsed} s"
# Whatever happened, no sleeping rank stays behind (only if its pid is still this test's).
for pid in $(sed -n 's/^rank [0-9]* pid \([0-9]*\) sleeps$/\1/p' <<<"$out"); do
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$(basename "$exe" | cut -c1-15)" ] &&
    kill -KILL "$pid" && echo "killed the sleeping rank (pid $pid) left behind"
done

[ "$elapsed" -lt 40 ] || fail "the job did not end within 40 s"
[ "$rc" -ne 0 ] || fail "the job exited 0"
grep -qx "backend $want_backend" <<<"$out" || fail "the backend was not $want_backend"
if grep -q "the call returned" <<<"$out"; then fail "a call returned"; fi
# "rank 2 (node 1 on vm)", "ranks 1 (node 0 on vm) and 3 (node 0 on vm)": nodes are contiguous
# blocks of ranks, named with their host where the ranks span nodes ("rank 1 (node 0)" on one).
nodes=${SYNK_SIMULATE_NODES:-1}
on_host=""
[ "$nodes" -gt 1 ] && on_host=" on $(hostname)"
IFS=, read -ra list <<<"$stuck"
names=""
for i in "${!list[@]}"; do
  r=${list[$i]}
  if [ "$i" -gt 0 ]; then
    if [ "$i" -eq $(( ${#list[@]} - 1 )) ]; then names+=" and "; else names+=", "; fi
  fi
  names+="$r (node $(( r * nodes / ranks ))$on_host)"
done
who="ranks $names, which have"
[ "${#list[@]}" -eq 1 ] && who="rank $names, which has"
for ((w = 0; w < ranks; w++)); do
  [[ ",$stuck," == *",$w,"* ]] && continue
  want="rank $w: synk Timeout: all_reduce(count 1, float32, sum): rank $w waited 2 s"
  want+=" (SYNK_TIMEOUT) for $who not reached this call (the calls are compared first)"
  n=$(grep -cxF "$want" <<<"$out")
  [ "$n" -eq 1 ] || fail "no line (or $n lines): $want"
  # SYNK_STALL_WARN's line first, naming them too (there was none while comparing).
  warn="warn: all_reduce(count 1, float32, sum): rank $w has waited 1 s (SYNK_STALL_WARN) for"
  warn+=" $who not reached this call (the calls are compared first); it fails after 2 s"
  grep -qF "$warn" <<<"$out" || fail "no stall warning: $warn"
  # The next call fails at once: it cannot be compared (it waited SYNK_TIMEOUT again, and a
  # late rank's record completed the comparison given up on).
  next="^rank $w: next call after 0\.[0-9] s: synk InvalidUsage: all_reduce: the comparison of"
  next+=" an earlier call \(all_reduce\(count 1, float32, sum\)\) did not complete \(a Timeout,"
  next+=" or an MPI error\), so no later call can be compared: create a new communicator$"
  grep -qE "$next" <<<"$out" || fail "rank $w's next call did not fail at once"
done
echo "PASS: every waiting rank named $who not reached this call"
