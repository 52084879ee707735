#!/usr/bin/env bash
# Usage: check_named_leak.sh CASE SHIM HELLO SYNKRUN MPIEXEC [MPIEXEC FLAGS...]
# Rank 0 dies (die_making_segment.c) right after creating a named segment, before rank 1 has
# mapped it: the name is left in /dev/shm by its dead creator. Nothing may outlive the job:
#   synkrun    the job under synkrun: gone when synkrun returns;
#   next_job   under a plain mpiexec: left (the shim works), then gone after the next job.
set -uo pipefail
case_name=$1 shim=$2 hello=$3 synkrun=$4
shift 4
fail() { echo "FAIL ($case_name): $*"; exit 1; }
segments() { find /dev/shm -maxdepth 1 -name 'synk-*' -user "$(id -u)" 2>/dev/null | sort; }
export SYNK_SHM_SEGMENTS=named SYNK_BACKEND=shm OMPI_MCA_btl=self,vader

before=$(segments)
new_segments() { comm -13 <(echo "$before") <(segments); }
run_doomed() {  # the job of which rank 0 dies making its segment; its output goes to $out
  out=$(DIE_MAKING_SEGMENT_RANK=0 LD_PRELOAD="$shim" timeout -k 5 60 "$@" 2>&1)
  rc=$?
  echo "$out"
  echo "-- exit code $rc"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "the job did not fail as rank 0 died (exit $rc)"
}

case $case_name in
synkrun)
  run_doomed "$synkrun" -np 2 "$hello"
  left=$(new_segments)
  [ -z "$left" ] || { rm -f $left; fail "left in /dev/shm after synkrun returned: $left"; }
  grep -q '^synkrun: removed /dev/shm/synk-[0-9a-f]\{24\}, left by a rank that died' <<<"$out" ||
    fail "synkrun did not say what it removed"
  ;;
next_job)
  run_doomed "$@" -np 2 "$hello"
  left=$(new_segments)
  [ -n "$left" ] || fail "no segment was left: the shim did not kill rank 0 in the window"
  out=$(SYNK_LOG=info timeout -k 5 60 "$@" -np 2 "$hello" 2>&1) || fail "the next job failed: $out"
  echo "$out"
  for f in $left; do
    [ ! -e "$f" ] || { rm -f $left; fail "the next job did not remove $f"; }
    grep -q "shm: removed $f, a segment whose creator died" <<<"$out" || fail "no log line for $f"
  done
  ;;
*) fail "unknown case" ;;
esac
echo "PASS ($case_name)"
