#!/usr/bin/env bash
# Usage: check_worker_death.sh MODE RANKS LAUNCH EXE MPIEXEC [MPIEXEC FLAGS...]
# Runs `EXE MODE` (worker_death_test) on RANKS ranks, one of which kills itself (in MODE late,
# none: one is late past SYNK_TIMEOUT, and every rank must report "ok"), and checks the
# outcome. LAUNCH=recovery: mpiexec --enable-recovery keeps the survivors running, so each of
# them must report "ok" (mpiexec's exit code says nothing then). LAUNCH=plain: Open MPI's
# default aborts the whole job when a rank dies; the job must end with a non-zero exit and
# mpiexec's message (a survivor that still reported must report "ok"). Either way no segment of
# the job may be left in /dev/shm.
set -uo pipefail
mode=$1 ranks=$2 launch=$3 exe=$4
shift 4
fail() { echo "FAIL: $*"; exit 1; }

extra=()
[ "$launch" = recovery ] && extra=(--enable-recovery)
start=$(date +%s)
# A hang is the failure this test exists for: end it here, with a message, before ctest's TIMEOUT.
out=$(SYNK_LOG=info timeout -k 5 40 "$@" "${extra[@]}" -np "$ranks" "$exe" "$mode" 2>&1)
rc=$?
echo "$out"
elapsed=$(( $(date +%s) - start ))
echo "-- mpiexec exit code $rc after $elapsed s"
[ "$elapsed" -lt 40 ] || fail "the job hung: killed after 40 s"

if grep -q "worker_death: rank [0-9]* FAILED" <<<"$out"; then fail "a rank reported a failure"; fi
if [ "$mode" = late ]; then  # no rank dies: every one reports, and the job ends well
  got=$(grep -c "worker_death: rank [0-9]* ok" <<<"$out")
  [ "$got" -eq "$ranks" ] || fail "$got of the $ranks ranks reported ok"
  [ "$rc" -eq 0 ] || fail "mpiexec exit code $rc"
elif [ "$launch" = recovery ]; then
  expected=$((ranks - 1))
  got=$(grep -c "worker_death: rank [0-9]* ok" <<<"$out")
  [ "$got" -eq "$expected" ] || fail "$got of the $expected surviving ranks reported ok"
else
  [ "$rc" -ne 0 ] || fail "the job lost a rank but exited 0"
  grep -q "exited on signal 9" <<<"$out" || fail "no message from mpiexec naming the killed rank"
fi

# Anonymous segments (memfd:synk-...) never had a name there; named ones (/synk-...) must be gone.
names=$(grep -o 'synk-[0-9a-f]\{24\}' <<<"$out" | sort -u)
if [ "${SYNK_SHM_SEGMENTS:-auto}" = named ]; then
  grep -q '/synk-[0-9a-f]\{24\}' <<<"$out" || fail "SYNK_SHM_SEGMENTS=named, but no named segment in the log"
fi
[ "$(wc -w <<<"$names")" -ge 2 ] || fail "expected the shm group's and the Data's segment names"
for n in $names; do
  [ ! -e "/dev/shm/$n" ] || fail "segment $n was left in /dev/shm"
done
echo "PASS: $mode, $ranks ranks, $launch launch; segments gone:" $names
