#!/usr/bin/env bash
# Usage: check_split_blame.sh SYNKRUN PYTHON (PYTHONPATH set)
# A rank of a split communicator never reaches a call. The ranks of a split communicator are not
# the job's: the Timeout names each rank with its job rank too, and synkrun names the job rank
# that had not reached the call (it took the communicator's numbers: "rank 0 had not reached",
# job rank 0, which had). 3 ranks: rank 0 alone, ranks 1-2 split off; job rank 1 sleeps.
set -uo pipefail
synkrun=$1 python=$2
fail() { echo "FAIL: $*"; exit 1; }
program='
import sys, time, numpy as np, synk
comm = synk.Communicator()
part = comm.split(0 if comm.rank == 0 else 1, comm.rank)
if comm.rank == 1:
    time.sleep(40)
    sys.exit(0)
part.all_reduce(np.ones(4, np.float32))'

# run NAME CODE WANT SYNKRUN_WANT ENV...: the job must fail with CODE and both lines.
run() {
  local name=$1 code=$2 want=$3 summary=$4 out rc
  shift 4
  out=$(env SYNK_TIMEOUT=2 "$@" timeout -k 5 60 "$synkrun" -np 3 -x PYTHONPATH \
        "$python" -c "$program" 2>&1)
  rc=$?
  echo "$out" | grep "synk" | grep -v "note:"
  echo "-- $name: exit code $rc"
  [ "$rc" = "$code" ] || fail "$name: exit code $rc, expected $code"
  grep -qF "$want" <<<"$out" || fail "$name: no line with: $want"
  grep -qF "$summary" <<<"$out" || fail "$name: synkrun did not say: $summary"
}

compared="synk Timeout: all_reduce(count 4, float32, sum): rank 1 (job rank 2) waited 2 s"
compared="$compared (SYNK_TIMEOUT) for rank 0 (job rank 1"
late="synkrun: rank 2 (exit code 1) failed first; rank 1 had not reached the call that timed out"
own="synk Timeout: all_reduce: rank 1 (job rank 2) waited 2 s (SYNK_TIMEOUT) for rank 0"
run shm 1 "$own (job rank 1), which has not reached this call" "$late" SYNK_BACKEND=shm
watchdog="synk Timeout: rank 1 (job rank 2): all_reduce(count 4, float32, sum) on the mpi backend"
run mpi 124 "$watchdog has waited" \
  "synkrun: rank 2 (exit code 124) failed first (synk's watchdog ended it" SYNK_BACKEND=mpi
run "mpi, calls compared" 1 "$compared), which has not reached this call" "$late" \
  SYNK_BACKEND=mpi SYNK_CHECK_CALLS=1
run "hier (2 simulated nodes)" 1 "$compared, node 0 on $(hostname)), which has not reached" \
  "$late" SYNK_SIMULATE_NODES=2
echo "every Timeout named the job's ranks"
