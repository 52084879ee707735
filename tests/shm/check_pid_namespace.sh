#!/usr/bin/env bash
# Usage: check_pid_namespace.sh RANKS EXE MPIEXEC [MPIEXEC FLAGS...]
# Runs pid_namespace_test on RANKS ranks under mpiexec, the last one in a PID namespace of its
# own (unshare, which needs root or user namespaces: skipped, exit 77, where it cannot). Every
# rank must report "ok"; the segments must have fallen back to named ones (SYNK_LOG=info says
# so), and none may be left in /dev/shm.
set -uo pipefail
ranks=$1 exe=$2
shift 2
fail() { echo "FAIL: $*"; exit 1; }

if ! unshare --pid --fork --mount-proc true 2>/dev/null; then
  echo "SKIP: unshare --pid --fork --mount-proc is not allowed here (needs root or user namespaces)"
  exit 77
fi
# mpiexec starts this script as every rank; the last rank re-runs the test in a new namespace.
if [ "${OMPI_COMM_WORLD_RANK:-}" != "" ]; then
  if [ "$OMPI_COMM_WORLD_RANK" -eq $((OMPI_COMM_WORLD_SIZE - 1)) ]; then
    exec unshare --pid --fork --mount-proc "$exe"
  fi
  exec "$exe"
fi

out=$(SYNK_LOG=info SYNK_TIMEOUT=30 SYNK_BACKEND=shm timeout -k 5 60 "$@" -np "$ranks" \
      "$0" "$ranks" "$exe" 2>&1)
rc=$?
echo "$out"
echo "-- mpiexec exit code $rc"
[ "$rc" -eq 0 ] || fail "the job exited with $rc"
if grep -q "pid_namespace: .*FAILED" <<<"$out"; then fail "a rank reported a failure"; fi
got=$(grep -c "pid_namespace: rank [0-9]* ok" <<<"$out")
[ "$got" -eq "$ranks" ] || fail "$got of the $ranks ranks reported ok"
grep -q "could not be shared.*using a named one" <<<"$out" ||
  fail "no fallback to a named segment in the log"
names=$(grep -o 'synk-[0-9a-f]\{24\}' <<<"$out" | sort -u)
[ "$(wc -w <<<"$names")" -ge 2 ] || fail "expected the shm group's and the Data's segment names"
for n in $names; do
  [ ! -e "/dev/shm/$n" ] || fail "segment $n was left in /dev/shm"
done
echo "PASS: $ranks ranks, the last in its own PID namespace; segments gone:" $names
