#!/usr/bin/env bash
# SYNK_* settings that differ across the ranks, or that one rank cannot read: every rank ends at
# the Communicator's start with an error naming the variable, where ranks hung in a split for
# ever (SYNK_SIMULATE_NODES, SYNK_BACKEND, a malformed SYNK_SHM_SPIN_US on one rank) or one
# rank's results were wrong (SYNK_FUSION_BYTES). Settings that may differ (SYNK_TIMEOUT, the
# timeline's file) run.
# Usage: check_settings_agreement.sh HELLO MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
hello=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# Runs hello on 2 ranks, VAR set to V0 on rank 0 and V1 on rank 1 ("-": unset).
run_split() {
  local var=$1 v0=$2 v1=$3
  shift 3
  cat >"$work/wrap.sh" <<W
#!/bin/sh
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then v='$v1'; else v='$v0'; fi
[ "\$v" = "-" ] || export $var="\$v"
exec "\$@"
W
  chmod +x "$work/wrap.sh"
  SYNK_TIMEOUT=20 timeout 60 "$@" -np 2 -x SYNK_TIMEOUT "$work/wrap.sh" "$hello" >"$work/out" 2>&1
}

expect_refused() {  # VAR V0 V1 TEXT0 TEXT1 MPIEXEC...: both ranks' errors, at once
  local var=$1 v0=$2 v1=$3 text0=$4 text1=$5
  shift 5
  local start=$SECONDS rc
  run_split "$var" "$v0" "$v1" "$@"
  rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ $((SECONDS - start)) -gt 15 ] ||
     ! grep -qF -- "$text0" "$work/out" || ! grep -qF -- "$text1" "$work/out"; then
    echo "FAIL $var=$v0/$v1: exit $rc after $((SECONDS - start)) s"; cat "$work/out"; fail=1
  else
    echo "ok: $var=$v0/$v1 refused on both ranks in $((SECONDS - start)) s"
  fi
}

differs="differs across the ranks (this rank's:"
expect_refused SYNK_SIMULATE_NODES 2 - "SYNK_SIMULATE_NODES $differs '2')" \
  "SYNK_SIMULATE_NODES $differs '1')" "$@"
expect_refused SYNK_BACKEND shm mpi "$differs 'shm')" "$differs 'mpi')" "$@"
expect_refused SYNK_FUSION_BYTES 0 - "SYNK_FUSION_BYTES $differs '0')" \
  "SYNK_FUSION_BYTES $differs '67108864')" "$@"
# An unset byte setting is said to be unset (it said '-1', a value the variable refuses).
expect_refused SYNK_SHM_ONE_STEP_BYTES 0 - "SYNK_SHM_ONE_STEP_BYTES $differs '0')" \
  "SYNK_SHM_ONE_STEP_BYTES $differs unset, the default)" "$@"
expect_refused SYNK_SHM_SPIN_US - abc "SYNK_SHM_SPIN_US='abc' is not valid" \
  "synk Remote: rank 1 cannot read its SYNK_* settings" "$@"
# A core variable, read where synk starts MPI: that rank alone failed, before MPI started, and
# the others waited in MPI_Init_thread (for ever, where the program caught the error).
expect_refused SYNK_TIMEOUT - abc "SYNK_TIMEOUT='abc' is not valid" \
  "synk Remote: rank 1 cannot read its SYNK_* settings" "$@"

expect_refused SYNK_TIMELINE "$work/t.json" - "SYNK_TIMELINE (set or not) $differs 'set')" \
  "SYNK_TIMELINE (set or not) $differs 'unset')" "$@"

expect_refused SYNK_SHM_ALGO broadcast=cma - "SYNK_SHM_ALGO $differs 'broadcast=cma')" \
  "SYNK_SHM_ALGO $differs unset, the default)" "$@"

# Settings that may differ: a timeout, and the timeline's file (each rank's own here). And
# settings the same in effect: a default set on one rank only (it was refused as differing),
# forced ways in another order.
for spec in "SYNK_TIMEOUT 5 7" "SYNK_TIMELINE $work/t0.json $work/t1.json" \
  "SYNK_MPI_MAX_CHUNK 2147483647 -" "SYNK_SHM_CMA_BYTES - 1048576" \
  "SYNK_SHM_SLOT_BYTES 1048576 -" \
  "SYNK_SHM_ALGO all_gather=slots,broadcast=cma broadcast=cma,all_gather=slots"; do
  set -- $spec "${@}"
  run_split "$@"
  rc=$?
  if [ "$rc" -ne 0 ] || [ "$(grep -c '(ok)' "$work/out")" -ne 2 ]; then
    echo "FAIL $1=$2/$3, which may differ: exit $rc"; cat "$work/out"; fail=1
  else
    echo "ok: $1=$2/$3 runs"
  fi
  shift 3
done
[ "$fail" -eq 0 ] && echo "settings that must agree are checked at the start"
exit "$fail"
