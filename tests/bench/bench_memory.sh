#!/usr/bin/env bash
# synk-bench refuses sizes whose host buffers do not fit in the node's memory, on every rank
# alike and before allocating anything: exit 2 and one message naming the sizes (per rank, and
# for the node's 2 ranks together), what is available and what to lower, within seconds.
# Before, -e 1024G failed in the allocation (exit 1, "cannot allocate"; "1T" was no size then).
# A size that the kernel grants but memory cannot hold, which the OOM killer ended (exit 137, no
# word), is not run here: without the check it would take the machine's memory
# (bench_memory_unit has that arithmetic).
# Usage: bench_memory.sh SYNK_BENCH MPIEXEC
set -euo pipefail
bench=$1 mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { timeout 60 "$mpiexec" --oversubscribe --allow-run-as-root --mca btl self,vader "$@"; }

# refused NAME BENCH_ARGS...: exit 2, and the one message (on rank 0 only) matches $pattern.
refused() {
  local name=$1 rc
  shift
  set +e
  run -np 2 "$bench" "$@" > "$work/out" 2> "$work/err"
  rc=$?
  set -e
  fail() { echo "FAILED ($name, exit $rc): $1"; cat "$work/out" "$work/err"; exit 1; }
  [ "$rc" -eq 2 ] || fail "exit $rc, expected 2"
  [ "$(grep -c "^synk-bench: " "$work/err")" -eq 1 ] || fail "not one message"
  grep -q "$pattern" "$work/err" || fail "no match for: $pattern"
  if grep -q "^#" "$work/out"; then fail "a header or table was printed"; fi
  echo "ok ($name): $(grep "^synk-bench: " "$work/err")"
}

tail="bytes ([0-9.]* GiB) of memory available (MemAvailable, within the cgroup's limit); lower -e"

# 1 TiB per buffer: 2 TiB per rank, 4 TiB for the node's 2 ranks.
pattern="^synk-bench: host buffers of 2199023255552 bytes per rank (2048.0 GiB), "
pattern+="4398046511104 (4096.0 GiB) for the 2 ranks on this node, do not fit in the [0-9]* "
pattern+="$tail (now 1099511627776), or run fewer ranks on a node$"
refused 1T allreduce -b 1T -e 1T --backend shm
refused "1T mpi" allreduce -b 1024G -e 1024G --backend mpi

# -R 1 takes the buffers from Communicator::alloc: refused alike, before any segment is made.
refused "1T -R 1" all -b 1024G -e 1024G -R 1 --backend shm
echo "bench memory passed"
