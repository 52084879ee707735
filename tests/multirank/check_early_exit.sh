#!/usr/bin/env bash
# Usage: check_early_exit.sh SYNKRUN cxx EXE | check_early_exit.sh SYNKRUN python PYTHON
# A rank that exits with an error while the others wait for it in a collective ends the job at
# once, and synkrun names it: MPI_Finalize, which waits for every rank in Open MPI, held it
# until the others' SYNK_TIMEOUT (here 60 s), and they were named instead. cxx: the program EXE
# (early_exit_test.cc) on each backend; python: scripts whose rank 0 raises or exits, and one
# whose rank 1 exits (sys.exit(3)) while rank 0 waits for it (PYTHONPATH set).
set -uo pipefail
synkrun=$1 kind=$2 program=$3
fail() { echo "FAIL: $*"; exit 1; }
export SYNK_TIMEOUT=60

# run NAME CODE RANK CMD...: the job must end within 20 s with CODE, naming RANK.
run() {
  local name=$1 code=$2 rank=$3 start rc elapsed  # (out: the job's output, for the caller)
  shift 3
  start=$(date +%s)
  out=$(timeout -k 5 50 "$synkrun" -np 2 "$@" 2>&1)
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  echo "$out" | tail -4
  echo "-- $name: exit code $rc after $elapsed s"
  [ "$elapsed" -lt 20 ] || fail "$name: the job took $elapsed s (the rank that left waited)"
  [ "$rc" = "$code" ] || fail "$name: exit code $rc, expected $code"
  grep -q "^synkrun: rank $rank (exit code $code) failed first" <<<"$out" ||
    fail "$name: synkrun did not name rank $rank"
}

if [ "$kind" = cxx ]; then
  for backend in shm mpi; do
    SYNK_BACKEND=$backend run "C++ on $backend" 3 0 "$program"
  done
else
  run Python 1 0 -x PYTHONPATH "$program" -c '
import numpy as np, synk
comm = synk.Communicator()
x = np.ones(1, np.float32)
comm.all_reduce(x)
if comm.rank == 0:
    raise RuntimeError("rank 0 gives up")
comm.all_reduce(x)'
  # With a KeyValue open, whose close at exit would wait for rank 1, waiting in pull_wait; and
  # sys.exit, which leaves the with block without sys.excepthook: its own code, at once.
  for leave in 'raise RuntimeError("rank 0 gives up")' 'sys.exit(3)'; do
    code=1
    [ "$leave" = 'sys.exit(3)' ] && code=3
    run "Python's $leave with a KeyValue" "$code" 0 -x PYTHONPATH "$program" -c "
import sys, numpy as np, synk
comm = synk.Communicator()
with synk.KeyValue(comm) as kv:
    kv.init_key(0, np.zeros(2, np.float32))
    x = np.ones(2, np.float32)
    if comm.rank == 0:
        $leave
    kv.push(0, x); kv.pull(0, x); kv.pull_wait(0)"
  done
  # Rank 1's exit closes the communicator rank 0 waits on: rank 0 waits for the process to end,
  # so that mpirun sees rank 1's exit code first (it named rank 0, exit code 1).
  run "Python's sys.exit(3) on rank 1" 3 1 -x PYTHONPATH "$program" -c '
import sys, time, numpy as np, synk
comm = synk.Communicator()
comm.barrier()
if comm.rank == 1:
    time.sleep(0.5)
    sys.exit(3)
comm.all_reduce(np.ones(4))'
  grep -q "all_reduce: rank 1 (pid [0-9]*) exited before it reached this call" <<<"$out" ||
    fail "rank 0's error did not say that rank 1 exited"
fi
echo "PASS: every job ended at once, naming the rank that left"
