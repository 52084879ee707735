#!/usr/bin/env bash
# Usage: check_stuck_rank.sh RANKS EXE MPIEXEC [MPIEXEC FLAGS...]
# Runs stuck_rank_test on RANKS ranks under plain mpiexec with SYNK_TIMEOUT=2: rank 1 stops
# itself (SIGSTOP), every other rank must report a Timeout naming it ("ok" lines), and the job
# must then end by itself with a non-zero exit, well before the 40 s this script allows, with
# nothing left in /dev/shm. The stopped rank is killed here in any case, so that a failing run
# leaves no process behind.
set -uo pipefail
ranks=$1 exe=$2
shift 2
fail() { echo "FAIL: $*"; exit 1; }

start=$(date +%s)
out=$(SYNK_LOG=info SYNK_TIMEOUT=2 timeout -k 5 40 "$@" -np "$ranks" "$exe" 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out"
echo "-- mpiexec exit code $rc after $elapsed s"
for pid in $(sed -n 's/^stuck_rank: rank [0-9]* pid \([0-9]*\) stops$/\1/p' <<<"$out"); do
  # Only if that pid is still the stopped test rank (not a pid since reused).
  if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = stuck_rank_test ] &&
     awk '{ exit !($3 == "T") }' "/proc/$pid/stat" 2>/dev/null; then
    kill -KILL "$pid" && echo "-- killed the stopped rank (pid $pid) left behind"
  fi
done

[ "$elapsed" -lt 30 ] || fail "the job did not end after the Timeout: killed after $elapsed s"
[ "$rc" -ne 0 ] || fail "the job lost a rank but exited 0"
if grep -q "stuck_rank: .*FAILED" <<<"$out"; then fail "a rank reported a failure"; fi
got=$(grep -c "stuck_rank: rank [0-9]* ok after" <<<"$out")
[ "$got" -eq $((ranks - 1)) ] || fail "$got of the $((ranks - 1)) waiting ranks reported the Timeout"

# Anonymous segments (memfd:synk-...) never had a name there; named ones (/synk-...) must be gone.
names=$(grep -o 'synk-[0-9a-f]\{24\}' <<<"$out" | sort -u)
if [ "${SYNK_SHM_SEGMENTS:-auto}" = named ]; then
  grep -q '/synk-[0-9a-f]\{24\}' <<<"$out" || fail "SYNK_SHM_SEGMENTS=named, but no named segment in the log"
fi
[ -n "$names" ] || fail "no shm segment name in the log (SYNK_LOG=info)"
for n in $names; do
  [ ! -e "/dev/shm/$n" ] || fail "segment $n was left in /dev/shm"
done
echo "PASS: $ranks ranks; the job ended $elapsed s after the start; segments gone:" $names
