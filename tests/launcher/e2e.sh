#!/bin/bash
# End-to-end tests of synkrun and its rank step, one case per ctest:
#   e2e.sh CASE    with SYNKRUN, PROBE, FIXTURES (and HELLO, MPIRUN) in the environment.
set -u
case_name=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Keep Open MPI on shared memory: no network probing in CI containers.
export OMPI_MCA_btl=self,vader
# One machine, whatever allocation the suite runs in (synkrun spreads ranks over its nodes).
unset SLURM_JOB_ID SLURM_JOBID
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL ($case_name): $*" >&2; echo "--- stdout:" >&2; cat "$work/out" >&2 2>/dev/null
         echo "--- stderr:" >&2; cat "$work/err" >&2 2>/dev/null; end_job; exit 1; }
# A case that fails while its job runs (in the background, as $pid) leaves no orphans behind.
end_job() {
  if [ -n "${pid:-}" ]; then kill -TERM "$pid" 2>/dev/null; fi
  local f
  for f in "$work"/pids/*; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
  return 0
}
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
now() { date +%s.%N; }
# A killed rank whose parent exited may linger as a zombie under a pid 1 that does not reap.
alive() { [ -r "/proc/$1/stat" ] && ! awk '{ exit !($3 == "Z") }' "/proc/$1/stat" 2>/dev/null; }
any_alive() { local p; for p in "$@"; do alive "$p" && return 0; done; return 1; }
# expect_gone SECONDS WHAT PID...: every PID ends within SECONDS, else it is killed and the case
# fails naming it ("pid P (its command) outlived WHAT").
expect_gone() {
  local limit=$1 what=$2 start p
  shift 2
  start=$(now)
  while any_alive "$@" && elapsed_below "$start" "$limit"; do sleep 0.05; done
  for p in "$@"; do
    if alive "$p"; then
      local cmd
      cmd=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)
      kill -KILL "$@" 2>/dev/null
      fail "pid $p ($cmd) outlived $what by $limit s"
    fi
  done
}
elapsed_below() { awk -v a="$1" -v b="$(now)" -v lim="$2" 'BEGIN { exit !((b - a) < lim) }'; }
descendants() { local p; for p in $(pgrep -P "$1"); do echo "$p"; descendants "$p"; done; }
# wait_for_exit PID SECONDS WHAT: waits for the background job PID, which must end within
# SECONDS, and returns its exit code; else the case fails showing what is still running.
wait_for_exit() {
  local start
  start=$(now)
  while alive "$1" && elapsed_below "$start" "$2"; do sleep 0.05; done
  if alive "$1"; then
    local tree
    tree=$(ps -o pid,ppid,stat,wchan:24,args -p "$(echo "$1" $(descendants "$1") | tr ' ' ,)")
    fail "$3 still running after $2 s:"$'\n'"$tree"
  fi
  wait "$1"
}

# Starts synkrun -np 1 PROBE in the background (as $pid) under a fake mpirun, first on PATH
# (synkrun's choice), that ignores the stop signals; returns once that mpirun runs, its pid in
# $work/mpirun.pid.
start_under_stuck_mpirun() {
  if [ ! -x "$work/bin/mpirun" ]; then
    mkdir -p "$work/bin"
    cat >"$work/bin/mpirun" <<'FAKE'
#!/bin/bash
trap '' INT TERM HUP
echo $$ > "$FAKE_MPIRUN_PID"
while :; do sleep 0.2; done
FAKE
    chmod +x "$work/bin/mpirun"
  fi
  rm -f "$work/mpirun.pid"
  FAKE_MPIRUN_PID="$work/mpirun.pid" PATH="$work/bin:$PATH" env --default-signal=INT \
    "$SYNKRUN" -np 1 "$PROBE" >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 100); do [ -s "$work/mpirun.pid" ] && break; sleep 0.1; done
  [ -s "$work/mpirun.pid" ] || fail "the fake mpirun did not start"
}

# "0-2,5" for the cpus of local rank $1 in synkrun's JSON plan for $2 ranks on this machine.
planned_cpus() {
  "$SYNKRUN" --dry-run --json -np "$2" 2>/dev/null | python3 -c '
import json, sys
plan = json.load(sys.stdin)
cpus = sorted(plan[int(sys.argv[1])]["cpus"])
out, i = [], 0
while i < len(cpus):
    j = i
    while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1: j += 1
    out.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
    i = j + 1
print(",".join(out))' "$1"
}

# Checks the probe lines of an n-rank run on this node: one per rank, SYNK_* consistent with
# Open MPI's view, the kernel's affinity equal to SYNK_CPUS and to the plan, cpus disjoint.
check_probe_lines() {
  local n=$1 r line
  [ "$(grep -c '^probe ' "$work/out")" = "$n" ] || fail "expected $n probe lines"
  local seen=""
  for ((r = 0; r < n; r++)); do
    line=$(grep "^probe rank=$r " "$work/out") || fail "no line from rank $r"
    [ "$(field "$line" world)" = "$n" ] || fail "rank $r: SYNK_WORLD_SIZE: $line"
    [ "$(field "$line" ompi_rank)" = "$r" ] || fail "rank $r: SYNK_RANK differs from Open MPI's: $line"
    [ "$(field "$line" local)" = "$(field "$line" ompi_local)" ] || fail "rank $r: local rank: $line"
    [ "$(field "$line" lsize)" = "$n" ] || fail "rank $r: SYNK_LOCAL_SIZE: $line"
    [ "$(field "$line" node)" = "0" ] || fail "rank $r: SYNK_NODE_RANK: $line"
    [ "$(field "$line" gpu)" = "[]" ] || fail "rank $r: SYNK_GPU on a node without GPU: $line"
    [ "$(field "$line" order)" = "PCI_BUS_ID" ] || fail "rank $r: CUDA_DEVICE_ORDER: $line"
    local cpus allowed
    cpus=$(field "$line" cpus)
    allowed=$(field "$line" allowed)
    [ -n "$cpus" ] || fail "rank $r: empty SYNK_CPUS"
    [ "$cpus" = "$allowed" ] || fail "rank $r: SYNK_CPUS=$cpus but Cpus_allowed_list=$allowed"
    [ "$cpus" = "$(planned_cpus "$(field "$line" local)" "$n")" ] ||
      fail "rank $r: bound to $cpus, the plan says $(planned_cpus "$r" "$n")"
    case " $seen " in *" $cpus "*) [ "$n" -gt "$(nproc --all)" ] || fail "cpus $cpus bound twice";; esac
    seen="$seen $cpus"
  done
}

# ctrl_c_at_terminal N COMMAND: runs COMMAND (a command line) in an interactive bash on a
# pseudo-terminal, types Ctrl-C there once N files are in $work/pids, and writes what the
# terminal showed, ending "EXIT=<its exit code>", to $work/out.
ctrl_c_at_terminal() {
  python3 - "$1" "$2" "$work/pids" >"$work/out" 2>"$work/err" <<'PY'
import os, pty, select, sys, time
count, command, piddir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
pid, fd = pty.fork()
if pid == 0:
    os.execvp("bash", ["bash", "--norc", "-i", "-c", f"{command}; echo EXIT=$?"])
out, end, sent = b"", time.time() + 40, False
while time.time() < end:
    if not sent and len(os.listdir(piddir)) == count:
        os.write(fd, b"\x03")  # the terminal's interrupt character
        sent = True
    r, _, _ = select.select([fd], [], [], 0.1)
    if r:
        try:
            d = os.read(fd, 4096)
        except OSError:
            break
        if not d:
            break
        out += d
print(out.decode(errors="replace"))
PY
}

case $case_name in
rank_step_mpirun)
  # The rank step alone, under a plain mpirun that binds by itself (its default for 2 ranks).
  "$MPIRUN" --oversubscribe -np 2 "$SYNKRUN" --rank-step -- "$PROBE" a1 >"$work/out" 2>"$work/err" ||
    fail "mpirun exit $?"
  check_probe_lines 2
  grep -q 'args=a1$' "$work/out" || fail "PROGRAM's arguments lost"
  # CPUs the ranks inherit unbound (taskset on mpirun, --bind-to none) are the user's: the plan
  # keeps to them, as synkrun's own launch does (it bound rank 0 to CPU 0, outside them).
  if [ "$(nproc)" -ge 2 ]; then
    taskset -c 1 "$MPIRUN" --oversubscribe --bind-to none -np 2 "$SYNKRUN" --rank-step -- \
      "$PROBE" >"$work/out" 2>"$work/err" || fail "mpirun under taskset: exit $?"
    [ "$(grep -c '^probe .*allowed=1 ' "$work/out")" = 2 ] ||
      fail "ranks left the CPU taskset gave mpirun: $(cat "$work/out")"
  fi
  ;;
rank_step_slurm)
  # The rank step as srun would start it (srun --mpi=pmix synkrun --rank-step PROGRAM): the
  # contract from Slurm's variables, rank 3 of 4, the second of 2 on node 1.
  SLURM_PROCID=3 SLURM_LOCALID=1 SLURM_NTASKS=4 SLURM_NODEID=1 SLURM_STEP_TASKS_PER_NODE='2(x2)' \
    "$SYNKRUN" --rank-step -- "$PROBE" s1 >"$work/out" 2>"$work/err" || fail "rank step exit $?"
  grep -q '^probe rank=3 world=4 local=1 lsize=2 node=1 .*args=s1$' "$work/out" ||
    fail "the contract from Slurm's variables: $(cat "$work/out" "$work/err")"
  ;;
rank_step_node_notes)
  # Where nobody saw a node's plan before the start (synkrun with -H or --hostfile, or srun),
  # its local rank 0 prints the notes (here 2 ranks on a node of 1 GPU get none), and the others
  # do not; under synkrun on one host (--plan-shown) synkrun showed them. Under srun, before,
  # ranks were left without a GPU and nothing said so.
  for launch in "--node-slots a:2,b:2" "" "--plan-shown"; do
    for local in 0 1; do
      # shellcheck disable=SC2086 # $launch is zero to two words
      SLURM_PROCID=$((2 + local)) SLURM_LOCALID=$local SLURM_NTASKS=4 SLURM_NODEID=1 \
        SLURM_STEP_TASKS_PER_NODE='2(x2)' "$SYNKRUN" --rank-step $launch --bind none \
        --topology "$FIXTURES/2numa-32pu-1gpu.xml" -- "$PROBE" >"$work/out" 2>"$work/err" ||
        fail "rank step ($launch) exit $?"
      grep -q "^probe rank=$((2 + local)) " "$work/out" || fail "local rank $local did not run"
      notes=$(grep -c 'note: 2 ranks need 2 GPUs, the node offers 1: ranks get no GPU' "$work/err")
      expected=$((1 - local))
      [ "$launch" = "--plan-shown" ] && expected=0
      [ "$notes" = "$expected" ] || fail "local rank $local ($launch) printed $notes notes"
    done
  done
  ;;
rank_step_inherited)
  # What the rank inherits from srun. A binding narrower than the node (srun --cpu-bind) stands:
  # before, the plan moved the rank onto every core of the node, other jobs' among them.
  slurm() { SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NTASKS=1 SLURM_NODEID=0 \
    SLURM_STEP_TASKS_PER_NODE=1 "$@"; }
  last=$(( $(nproc --all) - 1 ))
  slurm taskset -c "$last" "$SYNKRUN" --rank-step --report-bindings -- "$PROBE" \
    >"$work/out" 2>"$work/err" || fail "rank step exit $?"
  line=$(grep '^probe ' "$work/out")
  [ "$(field "$line" cpus)" = "$last" ] && [ "$(field "$line" allowed)" = "$last" ] ||
    fail "srun's binding to cpu $last not kept: $line"
  grep -q "cpus $last, numa - (srun's binding)$" "$work/err" || fail "no report of srun's binding"
  # CUDA_VISIBLE_DEVICES on a GPU node: an error, as in synkrun's launch, unless --gpus says
  # which GPUs ranks may use. Before, it was replaced and the rank took GPU 0 of the node.
  CUDA_VISIBLE_DEVICES=3 slurm "$SYNKRUN" --rank-step --bind none \
    --topology "$FIXTURES/2numa-32pu-1gpu.xml" -- "$PROBE" >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" = 2 ] || fail "inherited CUDA_VISIBLE_DEVICES: exit $rc, expected 2"
  grep -q 'CUDA_VISIBLE_DEVICES=3 is set, but synkrun gives each rank its own GPUs' "$work/err" ||
    fail "inherited CUDA_VISIBLE_DEVICES: no error"
  CUDA_VISIBLE_DEVICES=3 slurm "$SYNKRUN" --rank-step --bind none --gpus 0 \
    --topology "$FIXTURES/2numa-32pu-1gpu.xml" -- "$PROBE" >"$work/out" 2>"$work/err" ||
    fail "with --gpus 0: exit $?"
  grep -q ' gpu=\[0\] ' "$work/out" || fail "with --gpus 0: not GPU 0"
  # A launcher the rank step cannot read: an error, not rank 0 of 1 on every rank.
  PMIX_RANK=1 "$SYNKRUN" --rank-step -- "$PROBE" >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" = 2 ] && grep -q '^synkrun: rank step: PMIX_RANK is set, but not the local rank' \
    "$work/err" || fail "PMIX_RANK alone: exit $rc"
  # taskset around synkrun's own launch: the ranks stay on its CPUs.
  taskset -c "$last" "$SYNKRUN" -np 2 -- "$PROBE" >"$work/out" 2>"$work/err" ||
    fail "taskset synkrun: exit $?"
  [ "$(grep -c " cpus=$last allowed=$last " "$work/out")" = 2 ] ||
    fail "taskset -c $last synkrun: the ranks left cpu $last"
  ;;
env_and_binding)
  PROBE_EXPORTED=yes "$SYNKRUN" -np 2 -x FOO=bar -x PROBE_EXPORTED "$PROBE" -np 7 --x >"$work/out" \
    2>"$work/err" || fail "synkrun exit $?"
  check_probe_lines 2
  [ "$(grep -c 'foo=bar exported=yes args=-np 7 --x$' "$work/out")" = 2 ] ||
    fail "-x variables or PROGRAM's flags not passed"
  # -H and --hostfile reach mpirun (this node under its own name: the plan stays the same).
  "$SYNKRUN" -np 2 -H localhost:2 "$PROBE" >"$work/out" 2>"$work/err" || fail "-H: exit $?"
  check_probe_lines 2
  "$SYNKRUN" -np 2 -H=localhost:2 "$PROBE" >"$work/out" 2>"$work/err" || fail "-H=: exit $?"
  check_probe_lines 2
  echo "localhost slots=2" >"$work/hosts"
  "$SYNKRUN" -np 2 --hostfile "$work/hosts" "$PROBE" >"$work/out" 2>"$work/err" ||
    fail "--hostfile: exit $?"
  check_probe_lines 2
  echo "localhost slots=1" >"$work/hosts"
  "$SYNKRUN" -np 2 --hostfile "$work/hosts" "$PROBE" >"$work/out" 2>"$work/err" &&
    fail "mpirun accepted 2 ranks on a hostfile with 1 slot: the hostfile was not passed"
  ;;
failing_rank)
  start=$(now)
  PROBE_FAIL_RANK=1 PROBE_FAIL_CODE=3 PROBE_SLEEP=30 "$SYNKRUN" -np 2 "$PROBE" >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" = 3 ] || fail "exit code $rc, expected rank 1's 3"
  elapsed_below "$start" 15 || fail "the other rank was not stopped"
  tail -n 1 "$work/err" | grep -q '^synkrun: rank 1 (exit code 3) failed first; exit code 3$' ||
    fail "last stderr line does not name rank 1"
  PROBE_FAIL_RANK=0 PROBE_FAIL_SIGNAL=SEGV PROBE_SLEEP=30 "$SYNKRUN" -np 2 "$PROBE" >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" = 139 ] || fail "exit code $rc after a segfault, expected 139"
  tail -n 1 "$work/err" | grep -q '^synkrun: rank 0 on [^ ]* (signal 11' || fail "segfault of rank 0 not named"
  # A broken pipe is named with a note that its cause went before it.
  PROBE_FAIL_RANK=1 PROBE_FAIL_SIGNAL=PIPE PROBE_SLEEP=30 "$SYNKRUN" -np 2 "$PROBE" >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" = 141 ] || fail "exit code $rc after a SIGPIPE, expected 141"
  grep -q '^synkrun: rank 1 .*(signal 13.*failed first; exit code 141$' "$work/err" &&
    tail -n 1 "$work/err" | grep -q '^synkrun: note: a broken pipe: .* went away before it$' ||
    fail "a rank's SIGPIPE without the note on its cause"
  # A site's orte_abort_on_non_zero_status=0 made mpirun exit 0 for this job: synkrun restores it.
  start=$(now)
  OMPI_MCA_orte_abort_on_non_zero_status=0 PROBE_FAIL_RANK=1 PROBE_FAIL_CODE=3 PROBE_SLEEP=30 \
    "$SYNKRUN" -np 2 "$PROBE" >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" = 3 ] || fail "exit code $rc with orte_abort_on_non_zero_status=0, expected rank 1's 3"
  elapsed_below "$start" 15 || fail "the other rank ran on with orte_abort_on_non_zero_status=0"
  grep -q '^synkrun: note: OMPI_MCA_orte_abort_on_non_zero_status=0 would let a failed job' \
    "$work/err" || fail "no note that synkrun turns the abort on a failing rank back on"
  "$SYNKRUN" -np 2 /nonexistent/program >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" = 127 ] || fail "exit code $rc for a missing program, expected 127"
  grep -q 'cannot run /nonexistent/program' "$work/err" || fail "missing program not reported"
  ;;
timeout)
  mkdir "$work/pids"
  start=$(now)
  PROBE_PIDDIR="$work/pids" PROBE_SLEEP=60 "$SYNKRUN" --timeout 1 -np 2 "$PROBE" >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" = 124 ] || fail "exit code $rc, expected 124"
  elapsed_below "$start" 10 || fail "--timeout 1 took too long"
  grep -q 'timeout after 1 s' "$work/err" || fail "no timeout message"
  for f in "$work"/pids/*; do
    [ -e "$f" ] || fail "no rank started"
    if alive "$(cat "$f")"; then fail "rank pid $(cat "$f") still alive"; fi
  done
  ;;
sigint)
  mkdir "$work/pids"
  start=$(now)
  # A script's background jobs ignore SIGINT; give synkrun the default, as a terminal would.
  PROBE_PIDDIR="$work/pids" PROBE_SLEEP=60 env --default-signal=INT "$SYNKRUN" -np 2 "$PROBE" \
    >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 100); do [ "$(ls "$work/pids" | wc -l)" = 2 ] && break; sleep 0.1; done
  [ "$(ls "$work/pids" | wc -l)" = 2 ] || fail "ranks did not start"
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" = 130 ] || fail "exit code $rc after SIGINT, expected 130"
  elapsed_below "$start" 20 || fail "SIGINT took too long"
  grep -q 'stopped by signal 2' "$work/err" || fail "no message about the signal"
  for f in "$work"/pids/*; do
    if alive "$(cat "$f")"; then fail "rank pid $(cat "$f") still alive"; fi
  done
  ;;
job_shm_dir)
  # The ranks' Open MPI shared memory goes to a directory of synkrun's in /dev/shm, removed when
  # the job ends, also when a second Ctrl-C kills it at once (its vader segments were left in
  # /dev/shm before); one whose synkrun is gone is removed by the next synkrun.
  mkdir "$work/pids"
  PROBE_PIDDIR="$work/pids" PROBE_SLEEP=60 env --default-signal=INT "$SYNKRUN" -np 2 "$PROBE" \
    >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 100); do [ "$(ls "$work/pids" | wc -l)" = 2 ] && break; sleep 0.1; done
  [ "$(ls "$work/pids" | wc -l)" = 2 ] || fail "ranks did not start"
  mpirun_pid=$(pgrep -P "$pid" | head -1)
  dir=$(tr '\0' '\n' < "/proc/$mpirun_pid/cmdline" | grep -A1 -x btl_vader_backing_directory |
        tail -1)
  case $dir in
    /dev/shm/synkrun-job.*) ;;
    *) fail "no job directory in mpirun's command: $dir" ;;
  esac
  [ -d "$dir" ] || fail "$dir does not exist while the job runs"
  touch "$dir/vader_segment.test.0"  # what a rank's Open MPI would leave
  kill -INT "$pid"
  sleep 0.3
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" = 130 ] || fail "exit code $rc after two SIGINTs, expected 130"
  [ ! -e "$dir" ] || fail "$dir left after the job: $(ls -A "$dir")"
  # A directory whose synkrun is gone (nobody holds its lock), older than a minute.
  stale=$(mktemp -d /dev/shm/synkrun-job.XXXXXX)
  touch "$stale/vader_segment.test.1"
  touch -d '2 minutes ago' "$stale"
  "$SYNKRUN" -np 1 /bin/true >"$work/out" 2>"$work/err" || fail "synkrun exit $?"
  grep -q "^synkrun: removed $stale, left by a job that was killed$" "$work/err" ||
    fail "the stale directory was not reported"
  [ ! -e "$stale" ] || fail "$stale was not removed"
  ;;
terminal_ctrl_c_stubborn)
  # Ctrl-C at a terminal with a rank that ignores SIGTERM and has a child that does too: nothing
  # of the rank may run on. (Open MPI 4.1 here kills the rank's group itself; where an mpirun
  # kills the rank alone, synkrun, which noted the ranks' groups when the terminal's signal
  # reached mpirun's, kills what is left of them.)
  mkdir "$work/pids"
  export PROBE_PIDDIR="$work/pids"
  rank='trap "" TERM; (trap "" TERM; echo $BASHPID > "$PROBE_PIDDIR/child"; sleep 60) &
        echo $$ > "$PROBE_PIDDIR/rank"; sleep 60'
  ctrl_c_at_terminal 2 "'$SYNKRUN' -np 1 bash -c '$rank'"
  grep -q 'EXIT=130' "$work/out" || fail "Ctrl-C at a terminal: not exit 130"
  expect_gone 3 "synkrun" "$(cat "$work/pids/rank")" "$(cat "$work/pids/child")"
  ;;
terminal_ctrl_c)
  # At a terminal, mpirun's group holds it, so Ctrl-C signals that group, not synkrun: synkrun
  # must still say that signal 2 stopped the job (exit 130), and leave no rank behind.
  mkdir "$work/pids"
  export PROBE_PIDDIR="$work/pids" PROBE_SLEEP=60
  ctrl_c_at_terminal 2 "'$SYNKRUN' -np 2 '$PROBE'"
  grep -q 'EXIT=130' "$work/out" || fail "Ctrl-C at a terminal: not exit 130"
  grep -q 'stopped by signal 2' "$work/out" || fail "no message about the signal"
  for f in "$work"/pids/*; do
    if alive "$(cat "$f")"; then fail "rank pid $(cat "$f") still alive"; fi
  done
  ;;
mpirun_killed)
  # Open MPI gives each rank a process group of its own: a rank whose mpirun was killed lived
  # on as an orphan. The rank step asks the kernel to kill it with its parent.
  mkdir "$work/pids"
  PROBE_PIDDIR="$work/pids" PROBE_SLEEP=60 "$SYNKRUN" -np 2 "$PROBE" >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 100); do [ "$(ls "$work/pids" | wc -l)" = 2 ] && break; sleep 0.1; done
  [ "$(ls "$work/pids" | wc -l)" = 2 ] || fail "ranks did not start"
  mpirun_pid=$(pgrep -P "$pid" | head -1)
  [ -n "$mpirun_pid" ] || fail "no mpirun under synkrun"
  kill -KILL "$mpirun_pid"
  wait "$pid"
  rc=$?
  expect_gone 5 mpirun $(cat "$work"/pids/*)
  [ "$rc" = 137 ] || fail "exit code $rc, expected 137"
  # It says that mpirun itself was killed (it said only "the job failed with exit code 137").
  grep -q "synkrun: mpirun itself was ended by signal 9 (Killed), not by synkrun" "$work/err" ||
    fail "no line saying mpirun was killed"
  ;;
synkrun_killed)
  # Whatever ends synkrun, the job ends with it within 2 s: SIGKILL (mpirun gets SIGTERM from
  # the kernel), SIGQUIT (a stop, as SIGTERM), SIGUSR1 and SIGUSR2 (passed on: the ranks' sleep
  # dies of it). SIGUSR1 where synkrun starts with it blocked, as a service's runner may leave
  # it (mpirun must start with it unblocked); SIGUSR2 through a fake mpirun, first on PATH,
  # that passes no signal on (Open MPI 4.1.6 with plm isolated passed none).
  # Nothing is left in TMPDIR either: the ranks read synkrun's topology from memory.
  mkdir "$work/tmp" "$work/quiet"
  # (It starts -np copies of synkrun's rank step itself, as mpirun's children, and takes
  # SIGUSR1/2 without passing them on.)
  cat >"$work/quiet/mpirun" <<'QUIET'
#!/bin/bash
trap : USR1 USR2
n=1
while [ $# -gt 0 ] && [[ $1 != */synkrun ]]; do [ "$1" = -np ] && { n=$2; shift; }; shift; done
pids=()
for ((r = 0; r < n; r++)); do
  OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$n OMPI_COMM_WORLD_LOCAL_RANK=$r \
    OMPI_COMM_WORLD_LOCAL_SIZE=$n "$@" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do  # (a wait that a trapped signal ends is made again)
  while wait "$p"; s=$?; kill -0 "$p" 2>/dev/null; do :; done
  [ "$s" != 0 ] && rc=$s
done
exit $rc
QUIET
  chmod +x "$work/quiet/mpirun"
  for sig in KILL QUIT USR1 USR2; do
    rm -rf "$work/pids"
    mkdir "$work/pids"
    blocked=() path=$PATH
    [ "$sig" = USR1 ] && blocked=(python3 -c 'import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
os.execvp(sys.argv[1], sys.argv[1:])')
    [ "$sig" = USR2 ] && path=$work/quiet:$PATH
    # A script's background jobs ignore SIGINT and SIGQUIT; the defaults, as at a terminal.
    TMPDIR="$work/tmp" PROBE_PIDDIR="$work/pids" PROBE_SLEEP=60 PATH=$path env --default-signal \
      "${blocked[@]}" "$SYNKRUN" -np 2 "$PROBE" >"$work/out" 2>"$work/err" &
    pid=$!
    for _ in $(seq 100); do [ "$(ls "$work/pids" | wc -l)" = 2 ] && break; sleep 0.1; done
    [ "$(ls "$work/pids" | wc -l)" = 2 ] || fail "SIG$sig: ranks did not start"
    mpirun_pid=$(pgrep -P "$pid" | head -1)
    [ -n "$mpirun_pid" ] || fail "SIG$sig: no mpirun under synkrun"
    if [ "$sig" = USR1 ]; then  # synkrun started it with SIGUSR1 (bit 10) unblocked
      blocked_mask=$(awk '/^SigBlk:/ { print $2 }' "/proc/$mpirun_pid/status")
      (( (0x$blocked_mask & 0x200) == 0 )) || fail "SIGUSR1: mpirun starts with it blocked"
    fi
    # (Open MPI keeps its session directory there, ompi.*; synkrun kept its topology export.)
    [ -z "$(ls "$work/tmp" | grep -v '^ompi\.')" ] ||
      fail "SIG$sig: synkrun wrote to TMPDIR: $(ls "$work/tmp")"
    # The job's directory for Open MPI's shared memory: a SIGKILLed synkrun cannot remove it
    # (the next synkrun would, a minute on); this test does.
    shm_dir=$(tr '\0' '\n' < "/proc/$mpirun_pid/cmdline" |
              grep -A1 -x btl_vader_backing_directory | tail -1)
    kill -"$sig" "$pid"
    wait_for_exit "$pid" 10 "synkrun after SIG$sig"
    rc=$?
    case $sig in
      KILL) [ "$rc" = 137 ] || fail "SIGKILL: exit code $rc"
            case $shm_dir in /dev/shm/synkrun-job.*) rm -rf "$shm_dir" ;; esac ;;
      QUIT) [ "$rc" = 131 ] || fail "SIGQUIT: exit code $rc, expected 131"
            grep -q 'stopped by signal 3; exit code 131' "$work/err" || fail "SIGQUIT: message" ;;
      USR*) [ "$rc" != 0 ] || fail "SIG$sig: the ranks did not get it (exit 0)" ;;
    esac
    expect_gone 2 "synkrun (SIG$sig)" "$mpirun_pid" $(cat "$work"/pids/*)
    [ -z "$(ls "$work/tmp" | grep -v '^ompi\.')" ] || fail "SIG$sig: left in TMPDIR: $(ls "$work/tmp")"
  done
  ;;
stderr_closed)
  # `synkrun ... 2>&1 | head -1`: once head has gone, a write to synkrun's stderr fails; synkrun
  # stops the job as for a signal (SIGPIPE's exit code, 141) instead of dying and leaving it.
  mkdir "$work/pids"
  # (synkrun's own notes, as on a node with fewer GPUs than ranks, are not the ranks' lines.)
  PROBE_PIDDIR="$work/pids" timeout 30 "$SYNKRUN" -np 2 sh -c \
    'echo $$ > "$PROBE_PIDDIR/rank$SYNK_RANK"; while :; do echo x >&2; sleep .05; done' 2>&1 |
    grep --line-buffered -v '^synkrun: note: ' | head -1 >"$work/out"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 141 ] || fail "exit code $rc, expected 141"
  [ "$(cat "$work/out")" = x ] || fail "head saw: $(cat "$work/out")"
  expect_gone 2 synkrun $(cat "$work"/pids/*)
  ;;
stuck_mpirun)
  # An mpirun that ignores the signal synkrun forwards (one was seen up 19 minutes after its
  # ranks ended): killed with its group 10 s later, or at once on a second signal.
  for signals in 1 2; do
    start_under_stuck_mpirun
    start=$(now)
    kill -INT "$pid"
    [ "$signals" = 2 ] && sleep 0.5 && kill -INT "$pid"
    wait "$pid"
    rc=$?
    [ "$rc" = 130 ] || fail "exit code $rc after SIGINT, expected 130"
    if [ "$signals" = 1 ]; then
      elapsed_below "$start" 9 && fail "killed before the 10 s grace"
      elapsed_below "$start" 20 || fail "not killed 10 s after the signal"
      grep -q 'mpirun still running after signal 2: killing the job' "$work/err" || fail "message"
    else
      elapsed_below "$start" 5 || fail "a second SIGINT did not kill at once"
      grep -q 'mpirun still running after a second signal: killing the job' "$work/err" ||
        fail "message after the second signal"
    fi
    if alive "$(cat "$work/mpirun.pid")"; then fail "the fake mpirun is still alive"; fi
  done
  ;;
repeated_signal)
  # The same signal from the same process 50 ms later is the same request, not a second one:
  # GNU timeout sends its signal to synkrun and again to its process group, and synkrun killed
  # the job at once (SIGKILL), skipping the ranks' handlers. An mpirun that ignores the signal
  # shows whether synkrun killed it at once or after the grace.
  start_under_stuck_mpirun
  start=$(now)
  kill -INT "$pid"
  sleep 0.05
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" = 130 ] || fail "exit code $rc after SIGINT, expected 130"
  elapsed_below "$start" 9 && fail "killed before the 10 s grace: the repeat counted as a second"
  grep -q 'mpirun still running after signal 2: killing the job' "$work/err" || fail "message"
  ;;
stubborn_rank)
  # A rank that ignores SIGTERM, with a child of its own (a data loader) that does too: a
  # second SIGINT makes synkrun kill the job at once, mpirun before it could kill its ranks.
  # The rank and its child must go with it (they ran on as orphans).
  mkdir "$work/pids"
  PROBE_PIDDIR="$work/pids" "$SYNKRUN" -np 1 bash -c \
    'trap "" TERM; (trap "" TERM; echo $BASHPID > "$PROBE_PIDDIR/child"; sleep 60) &
     echo $$ > "$PROBE_PIDDIR/rank"; sleep 60' >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 100); do
    [ -s "$work/pids/rank" ] && [ -s "$work/pids/child" ] && break
    sleep 0.1
  done
  [ -s "$work/pids/child" ] || fail "the rank and its child did not start"
  kill -INT "$pid"
  sleep 0.3
  kill -INT "$pid"
  wait_for_exit "$pid" 10 "synkrun after a second SIGINT"
  rc=$?
  [ "$rc" = 130 ] || fail "exit code $rc, expected 130"
  expect_gone 3 "synkrun's SIGKILL" "$(cat "$work/pids/rank")" "$(cat "$work/pids/child")"
  ;;
orphan_of_failed_rank)
  # A rank that fails by itself (exit 3) leaves a child (a data loader) running: mpirun kills
  # the groups of the ranks it ends, not of one that ended by itself, and the child ran on as
  # an orphan. It comes to synkrun (the subreaper), which kills it once the job has failed. A
  # job that ends well leaves its ranks' leftovers alone.
  mkdir "$work/pids"
  for outcome in fail pass; do
    rm -f "$work"/pids/*
    PROBE_PIDDIR="$work/pids" OUTCOME=$outcome "$SYNKRUN" -np 2 bash -c \
      'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
         (echo $BASHPID > "$PROBE_PIDDIR/child"; exec sleep 30 </dev/null >/dev/null 2>&1) &
         for _ in $(seq 50); do [ -s "$PROBE_PIDDIR/child" ] && break; sleep 0.1; done
         [ "$OUTCOME" = fail ] && exit 3
       fi; sleep 1' >"$work/out" 2>"$work/err"
    rc=$?
    [ -s "$work/pids/child" ] || fail "the rank's child did not start"
    child=$(cat "$work/pids/child")
    if [ "$outcome" = fail ]; then
      [ "$rc" = 3 ] || fail "exit code $rc, expected 3"
      expect_gone 2 "the failed job" "$child"
      grep -q "^synkrun: killed 1 process of the job left running (pid $child (sleep))" \
        "$work/err" || fail "no line naming the killed child"
    else
      [ "$rc" = 0 ] || fail "exit code $rc, expected 0"
      alive "$child" || fail "a job that ended well killed its rank's child"
      grep -q "^synkrun: killed" "$work/err" && fail "a job that ended well killed something"
      kill -KILL "$child"
    fi
  done
  ;;
oversubscribe)
  n=$(( $(nproc --all) + 1 ))
  "$SYNKRUN" -np "$n" --report-bindings "$PROBE" >"$work/out" 2>"$work/err" || fail "exit $?"
  grep -q "^synkrun: note: $n ranks on .* cores: oversubscribing" "$work/err" || fail "no note"
  grep -q 'fewer cores than ranks' "$work/err" || fail "sharing not reported"
  [ "$(grep -c '^probe ' "$work/out")" = "$n" ] || fail "expected $n ranks"
  [ "$(grep -c '^synkrun: host .* rank .* local rank .*: gpu -, cpus .*, numa ' "$work/err")" = "$n" ] ||
    fail "expected $n --report-bindings lines"
  # A setting of the user's that forbids it: said before the job starts (mpirun refused
  # --oversubscribe with "Conflicting directives for mapping policy"), as a dry run's note too.
  refused="synkrun: error: $n ranks on \([0-9]*\) cores need mpirun's --oversubscribe, which"
  refused="$refused OMPI_MCA_rmaps_base_no_oversubscribe=1 forbids: unset it, or run at most"
  OMPI_MCA_rmaps_base_no_oversubscribe=1 "$SYNKRUN" -np "$n" "$PROBE" >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" = 2 ] || fail "a refused oversubscription: exit $rc, expected 2"
  grep -q "^$refused \1 ranks here$" "$work/err" || fail "no line: $refused"
  [ ! -s "$work/out" ] || fail "a refused oversubscription started ranks"
  OMPI_MCA_rmaps_base_no_oversubscribe=1 "$SYNKRUN" -np "$n" --dry-run "$PROBE" >"$work/out" \
    2>&1 || fail "dry run exit $?"
  grep -q "the job would fail: $n ranks on" "$work/out" || fail "the dry run said nothing"
  ;;
hosts_without_np)
  # Inside a Slurm allocation of 2 nodes (no -H), mpirun spreads the ranks over the nodes: 4
  # ranks on this 2-core node were taken for an oversubscribed single node (--oversubscribe,
  # a job directory that exists only here, and the plan's notes).
  SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 "$SYNKRUN" --dry-run -np 4 "$PROBE" \
    >"$work/out" 2>"$work/err" || fail "allocation dry run: exit $?"
  grep -q 'a Slurm allocation of 2 nodes: mpirun spreads the ranks over them' "$work/out" ||
    fail "no note of the allocation"
  grep -A1 '^mpirun command:' "$work/out" | grep -q -- '--oversubscribe' &&
    fail "--oversubscribe inside an allocation"
  # With -H (or --hostfile) and no -np, mpirun starts a rank per slot and each node plans for
  # the ranks it gets (this node's GPU or core count put them all on the first host).
  "$SYNKRUN" --dry-run -H localhost:3 "$PROBE" >"$work/out" 2>"$work/err" || fail "dry run: exit $?"
  grep -q 'one rank per slot' "$work/out" || fail "no per-slot note"
  grep -q "^note: mpirun fills the hosts' slots in order: localhost ranks 0-2$" "$work/out" ||
    fail "no note of the ranks by host"
  grep -A1 '^mpirun command:' "$work/out" | grep -q -- ' -np ' && fail "-np given to mpirun"
  "$SYNKRUN" -H localhost:3 --report-bindings "$PROBE" >"$work/out" 2>"$work/err" || fail "run: exit $?"
  [ "$(grep -c '^probe ' "$work/out")" = 3 ] || fail "expected 3 ranks, one per slot"
  # A hostfile line without slots= has the host's cores: more ranks than that is mpirun's page,
  # which names synkrun and offers an --oversubscribe synkrun does not take; one line says why.
  echo localhost >"$work/hostfile"
  "$SYNKRUN" --hostfile "$work/hostfile" -np $(($(nproc) + 1)) "$PROBE" >"$work/out" 2>"$work/err" &&
    fail "more ranks than the hostfile's slots ran"
  grep -q '^synkrun: error: mpirun found fewer slots than ranks' "$work/err" || fail "slots line"
  ;;
ssh_options)
  # Another host through Open MPI's default agent: ssh gets options that end a host that does
  # not answer in 10 s and one that asks for a password at once (synkrun waited silently for
  # ssh's TCP retries, or for ever at a prompt). A fake ssh on PATH records its arguments.
  mkdir "$work/bin"
  cat >"$work/bin/ssh" <<EOF
#!/bin/sh
echo "\$*" >> "$work/ssh.log"
echo "ssh: connect to host nodeX port 22: Connection timed out" >&2
exit 255
EOF
  chmod +x "$work/bin/ssh"
  unset OMPI_MCA_plm OMPI_MCA_plm_rsh_agent OMPI_MCA_plm_rsh_args
  PATH="$work/bin:$PATH" timeout 30 "$SYNKRUN" -H nodeX:1 -np 1 "$PROBE" >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" = 255 ] || fail "exit $rc, expected mpirun's 255"
  grep -q -- '-o BatchMode=yes -o ConnectTimeout=10 nodeX ' "$work/ssh.log" || fail "ssh options"
  grep -q 'could not start or lost its daemon on a host' "$work/err" || fail "daemon message"
  # The user's own ssh options stay theirs.
  : >"$work/ssh.log"
  PATH="$work/bin:$PATH" OMPI_MCA_plm_rsh_args="-p 2222" timeout 30 "$SYNKRUN" -H nodeX:1 -np 1 \
    "$PROBE" >"$work/out" 2>"$work/err"
  grep -q -- '-p 2222 nodeX ' "$work/ssh.log" || fail "the user's ssh options"
  grep -q 'BatchMode' "$work/ssh.log" && fail "synkrun's options beside the user's"
  # Where Open MPI may start ranks on this node only (some container images set this), another
  # host is a usage error that says why; mpirun said "already filled". This node still runs.
  : >"$work/ssh.log"
  PATH="$work/bin:$PATH" OMPI_MCA_plm=isolated "$SYNKRUN" -H nodeX:1 -np 1 "$PROBE" \
    >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" = 2 ] || fail "OMPI_MCA_plm=isolated with another host: exit $rc, expected 2"
  want='^synkrun: error: OMPI_MCA_plm=isolated has Open MPI start ranks on this node only, and'
  grep -q "$want nodeX is another host" "$work/err" || fail "OMPI_MCA_plm=isolated: message"
  [ -s "$work/ssh.log" ] && fail "OMPI_MCA_plm=isolated: ssh was run"
  OMPI_MCA_plm=isolated "$SYNKRUN" -H localhost:1 -np 1 "$PROBE" >"$work/out" 2>"$work/err" ||
    fail "OMPI_MCA_plm=isolated on this host alone: exit $?"
  ;;
program_lookup)
  # PROGRAM as mpirun finds it: on PATH, else in the current directory; one line and the
  # shell's exit code (127 not found, 126 not runnable) before anything starts.
  check_cannot_run() {  # expected-code args...
    local want=$1
    shift
    "$SYNKRUN" "$@" >"$work/out" 2>"$work/err"
    local rc=$?
    [ "$rc" = "$want" ] || fail "synkrun $*: exit $rc, expected $want"
    [ "$(wc -l <"$work/err")" = 1 ] || fail "synkrun $*: not one line on stderr"
    grep -q '^synkrun: error: cannot run ' "$work/err" || fail "synkrun $*: message format"
  }
  check_cannot_run 127 -np 1 "$work/no-such-program"
  check_cannot_run 127 -np 1 no-such-program-anywhere
  # Hosts that are all this one cannot have it either (it was a note, and the job started).
  check_cannot_run 127 -H localhost:2 no-such-program-anywhere
  printf '#!/bin/sh\necho hi\n' >"$work/not-executable"
  check_cannot_run 126 -np 1 "$work/not-executable"
  check_cannot_run 126 -np 1 "$work"
  # A current directory that was removed: the same line, not std::terminate's abort.
  mkdir "$work/gone"
  (cd "$work/gone" && rmdir "$work/gone" && check_cannot_run 127 -np 1 no-such-program-anywhere) ||
    exit 1
  cp "$PROBE" "$work/probe_here.sh"
  (cd "$work" && "$SYNKRUN" -np 2 probe_here.sh >"$work/out" 2>"$work/err") ||
    fail "a program in the current directory did not run"
  [ "$(grep -c '^probe ' "$work/out")" = 2 ] || fail "expected 2 probe lines"
  # A dry run plans for wherever the program is: a note, not an error.
  "$SYNKRUN" --dry-run -np 1 no-such-program-anywhere >"$work/out" 2>"$work/err" ||
    fail "--dry-run with a program not here: exit $?"
  grep -q '^synkrun: note: cannot run no-such-program-anywhere' "$work/err" || fail "dry-run note"
  ;;
argument_errors)
  check_usage_error() {  # args...: exit 2, one line on stderr starting "synkrun: error:", no stdout
    "$SYNKRUN" "$@" >"$work/out" 2>"$work/err"
    local rc=$?
    [ "$rc" = 2 ] || fail "synkrun $*: exit $rc, expected 2"
    [ "$(wc -l <"$work/err")" = 1 ] || fail "synkrun $*: not one line on stderr"
    grep -q '^synkrun: error: ' "$work/err" || fail "synkrun $*: message format"
    [ ! -s "$work/out" ] || fail "synkrun $*: output on stdout"
  }
  check_usage_error
  check_usage_error -np 2
  check_usage_error -np 0 "$PROBE"
  check_usage_error -np -1 "$PROBE"
  check_usage_error -np abc "$PROBE"
  check_usage_error --hostfile "$work/no-such-hostfile" "$PROBE"
  check_usage_error --topology "$work/no-such-topology.xml" --dry-run "$PROBE"
  echo "<topology>broken" >"$work/broken.xml"
  check_usage_error --topology "$work/broken.xml" -np 1 --dry-run "$PROBE"
  # Another machine's plan would bind ranks to cores this one may not have.
  check_usage_error --topology "$FIXTURES/4numa-96pu-nogpu.xml" -np 2 "$PROBE"
  grep -q 'goes with --dry-run' "$work/err" || fail "--topology without --dry-run message"
  # Typos refused before mpirun: 64 ranks a core at most on one node, a timeout that would
  # overflow the clock, hosts that are not host:slots, an option taken as -H's value.
  check_usage_error -np $((64 * $(nproc --all) + 1)) "$PROBE"
  grep -q 'ranks per core' "$work/err" || fail "-np per core message"
  check_usage_error -np 2147483647 --dry-run "$PROBE"
  check_usage_error --timeout 1e10 -np 1 "$PROBE"
  check_usage_error -H localhost:abc -np 1 "$PROBE"
  check_usage_error -H -np 1 "$PROBE"
  check_usage_error -H localhost:1 -np 2 "$PROBE"
  grep -q 'offers 1 slot' "$work/err" || fail "-np beyond -H's slots message"
  # Beside a hostfile, -H gives the slots, as mpirun takes them (a host without :N has 1).
  echo "localhost slots=2" >"$work/hosts"
  check_usage_error --hostfile "$work/hosts" -H localhost -np 2 "$PROBE"
  grep -q 'but -H localhost offers 1 slot' "$work/err" || fail "-H beside a hostfile"
  # An empty value ("--gpus $LIST" with LIST unset) is an error, not the option's default.
  for opt in -H --hostfile --gpus --bind --topology --timeout; do
    check_usage_error "$opt" "" -np 1 --dry-run "$PROBE"
    grep -q 'an empty value' "$work/err" || fail "$opt '': message"
  done
  check_usage_error --timeout 0x10 -np 1 "$PROBE"
  # The ranks-per-core guard counts the slots a host list gives this host.
  many=$((64 * $(nproc --all) + 1))
  check_usage_error -H "localhost:$many" "$PROBE"
  grep -q "puts $many ranks on this host: more than 64 ranks per core" "$work/err" || fail "-H guard"
  check_usage_error -H "other-host:4,127.0.0.1:$many" -np $((many + 4)) "$PROBE"
  echo "localhost slots=$many" >"$work/hosts"
  check_usage_error --hostfile "$work/hosts" "$PROBE"
  grep -q "puts $many ranks on this host" "$work/err" || fail "hostfile guard"
  # Host names an rsh agent would take for its own options, and a directory as the hostfile.
  check_usage_error "--host=-oProxyCommand=touch $work/pwned" -np 1 "$PROBE"
  grep -q 'starts with "-", which ssh would read as an option' "$work/err" || fail "-H name message"
  check_usage_error -H "user@-oProxyCommand=x" -np 1 "$PROBE"
  printf 'localhost slots=1\n-oProxyCommand=x slots=1\n' >"$work/hosts"
  check_usage_error --hostfile "$work/hosts" -np 1 "$PROBE"
  grep -q 'line 2: host "-oProxyCommand=x" starts with "-"' "$work/err" || fail "hostfile name"
  check_usage_error --hostfile "$work" "$PROBE"
  grep -q 'is a directory' "$work/err" || fail "directory hostfile message"
  # A hostfile without hosts: mpirun's "No nodes are available" would not say which file.
  printf '# no hosts yet\n\n' >"$work/hosts"
  check_usage_error --hostfile "$work/hosts" "$PROBE"
  grep -q "hostfile $work/hosts names no host" "$work/err" || fail "empty hostfile message"
  [ ! -e "$work/pwned" ] || fail "the ProxyCommand ran"
  # A ":" among PROGRAM's arguments would start another program under mpirun (MPMD).
  check_usage_error -np 1 "$PROBE" a : b
  grep -q "argument 2 is \":\"" "$work/err" || fail "':' argument message"
  check_usage_error --no-such-option "$PROBE"
  check_usage_error --bind socket "$PROBE"
  check_usage_error --topology "$FIXTURES/4numa-96pu-nogpu.xml" --dry-run "$PROBE"
  check_usage_error --topology "$FIXTURES/2numa-32pu-1gpu.xml" -np 2 --bind gpu --dry-run "$PROBE"
  grep -q '2 ranks but the node has 1 GPU' "$work/err" || fail "ranks vs GPUs message"
  # Without --bind, the same job runs bound to cores, and says so.
  "$SYNKRUN" --topology "$FIXTURES/2numa-32pu-1gpu.xml" -np 2 --dry-run "$PROBE" >"$work/out" \
    2>"$work/err" || fail "2 ranks on 1 GPU without --bind: exit $?"
  grep -q 'bind core' "$work/out" && grep -q 'ranks get no GPU and are bound to cores' "$work/out" ||
    fail "2 ranks on 1 GPU without --bind: $(cat "$work/out")"
  "$SYNKRUN" --help >"$work/out" 2>"$work/err" || fail "--help exit $?"
  grep -q -- '--gpus-per-rank' "$work/out" || fail "--help output"
  ;;
dry_run_json)
  "$SYNKRUN" --dry-run --json --topology "$FIXTURES/dgx2-16gpu.xml" -np 16 >"$work/out" 2>"$work/err" ||
    fail "exit $?"
  python3 - "$work/out" <<'PY' || fail "JSON plan"
import json, sys
plan = json.load(open(sys.argv[1]))
assert len(plan) == 16, len(plan)
pcis = [r["pci"] for r in plan]
assert pcis == sorted(pcis), pcis
for i, r in enumerate(plan):
    assert r["local_rank"] == i and r["gpu"] == i, r
    assert r["cpus"] == ([i // 4] if i < 8 else [24 + (i - 8) // 4]), r
    assert r["numa"] == (0 if i < 8 else 1), r
    assert set(["local_rank", "gpu", "pci", "cpus", "numa"]) <= set(r), r
PY
  grep -q -- '--bind-to none' "$work/err" || fail "mpirun command not shown"
  "$SYNKRUN" --dry-run --json --topology "$FIXTURES/4numa-96pu-nogpu.xml" -np 2 >"$work/out" 2>"$work/err" ||
    fail "exit $?"
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p[0]["gpu"] is None and p[0]["pci"] is None and p[1]["numa"] == 1 and p[1]["cpus"] == list(range(24, 48)), p' \
    "$work/out" || fail "CPU-only JSON plan"
  ;;
hello)
  "$SYNKRUN" -np 2 --report-bindings "$HELLO" >"$work/out" 2>"$work/err" || fail "exit $?"
  [ "$(grep -c 'all_reduce(rank+1) = 3 (ok)' "$work/out")" = 2 ] || fail "hello output"
  [ "$(grep -c '^synkrun: host .* rank [01] local rank [01]: gpu -, cpus ' "$work/err")" = 2 ] ||
    fail "--report-bindings lines"
  ;;
*)
  echo "unknown case $case_name" >&2
  exit 2
  ;;
esac
echo "PASS $case_name"
