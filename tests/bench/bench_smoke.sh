#!/usr/bin/env bash
# Usage: bench_smoke.sh SYNK_BENCH MPIEXEC
set -euo pipefail
bench=$1 mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { "$mpiexec" --oversubscribe --allow-run-as-root --mca btl self,vader "$@"; }
# refused RANKS BENCH_ARGS... -- MESSAGE: the bench refuses its arguments (exit 2) saying MESSAGE.
refused() {
  local ranks=$1 args=() rc
  shift
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  set +e
  run -np "$ranks" "$bench" "${args[@]}" > "$work/bad.txt" 2>&1
  rc=$?
  set -e
  grep -q -- "$2" "$work/bad.txt" || { cat "$work/bad.txt"; exit 1; }
  [ "$rc" -eq 2 ] || { echo "${args[*]} exited $rc, not 2"; exit 1; }
}

run -np 2 "$bench" all -b 8 -e 64K -f 8 -n 2 -w 1 --backend all --json "$work/out.json" | tee "$work/out.txt"
grep -q "#wrong total: 0" "$work/out.txt"
# nccl is measured where a GPU is visible, and noted as not available elsewhere
grep -q "^# backend nccl: \(not available: \|synk's calls on device buffers\)" "$work/out.txt"
# the shm tables are framed by the handoff probe (2 ranks on one node)
for when in before after; do
  n=$(grep -c "^# handoff probe ($when the table): rank 0 rewrote 1 MiB rank 1 had read in [0-9.]* us, rank 1 read it in [0-9.]* us$" "$work/out.txt")
  [ "$n" -eq 5 ] || { echo "$n handoff probes $when the tables, not 5"; exit 1; }
done
for coll in allreduce broadcast reduce allgather reduce_scatter; do
  grep -q "^# $coll" "$work/out.txt" || { echo "no table for $coll"; exit 1; }
done
python3 - "$work/out.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
keys = {"coll", "bytes", "count", "dtype", "op", "root", "backend", "time_us", "algbw", "busbw",
        "wrong", "mpi_time_us", "speedup", "ranks", "in_place", "nonblocking", "fresh",
        "node_buffers"}
assert rows, "no rows"
for r in rows:
    assert keys <= set(r), f"missing keys in {r}"
    assert r["wrong"] == 0, r
    assert r["ranks"] == 2 and not r["in_place"] and not r["nonblocking"], r
    assert (r["root"] is None) == (r["coll"] not in ("broadcast", "reduce", "gather", "scatter")), r
assert {r["backend"] for r in rows} >= {"mpi", "shm"}, {r["backend"] for r in rows}
print(f"json: {len(rows)} rows")
PY

# -F 1 rewrites the inputs between timed calls; the results are still checked
run -np 2 "$bench" all -b 64 -e 64K -f 32 -n 2 -w 1 -F 1 --backend shm | tee "$work/fresh.txt"
grep -q "fresh: 1" "$work/fresh.txt"
grep -q "#wrong total: 0" "$work/fresh.txt"

# -N 1 times (and checks) synk's non-blocking calls, each waited for at once; under
# --mpi-threads multiple the mpi backend's run on the progress thread
run -np 2 "$bench" all -b 64 -e 64K -f 32 -n 2 -w 1 -N 1 --backend all | tee "$work/nonblocking.txt"
grep -q "nonblocking: 1 in place: 0 mpi threads: single" "$work/nonblocking.txt"
grep -q "#wrong total: 0" "$work/nonblocking.txt"
run -np 2 "$bench" all -b 64 -e 64K -f 32 -n 2 -w 1 -N 1 --backend mpi --mpi-threads multiple |
  tee "$work/threads.txt"
grep -q "nonblocking: 1 in place: 0 mpi threads: multiple" "$work/threads.txt"
grep -q "#wrong total: 0" "$work/threads.txt"
refused 1 all --mpi-threads funneled -- "--mpi-threads funneled: expected single or multiple"
# The last --mpi-threads counts, as for every option (the first did)
run -np 1 "$bench" allreduce -e 8 -n 1 -w 0 --mpi-threads single --mpi-threads=multiple |
  grep -q "mpi threads: multiple" || { echo "the last --mpi-threads did not count"; exit 1; }
# nccl-tests' -g is named as an option synk-bench lacks (CLI11 said "not expected: 1 -g")
refused 1 allreduce -e 8 -g 1 -- "unknown option -g (nccl-tests' -g, -t"
# (a valid option inside the unknown one's name is not taken for it: -n in --ngpus)
refused 1 allreduce -e 8 -n 5 --ngpus 1 -- "unknown option --ngpus (nccl-tests'"
# -S: the untimed calls after the warmup (155 by default), 0 for none
grep -q "warmup iters: 1 settle iters: 155 iters: 2" "$work/threads.txt"
refused 1 all -S -1 -- "-S -1: SETTLE must be >= 0"

# -I 1: every call in place (synk's by NCCL's conventions, MPI's with MPI_IN_PLACE), checked;
# gather and scatter on 3 ranks with another root
run -np 2 "$bench" all -b 64 -e 64K -f 32 -n 2 -w 1 -I 1 --backend all | tee "$work/in_place.txt"
grep -q "nonblocking: 0 in place: 1 " "$work/in_place.txt"
grep -q "#wrong total: 0" "$work/in_place.txt"
for coll in gather scatter; do
  run -np 3 "$bench" "$coll" -b 96 -e 96K -f 32 -n 2 -w 1 -I 1 -r 1 --backend all |
    tee "$work/in_place_$coll.txt"
  grep -q "#wrong total: 0" "$work/in_place_$coll.txt"
done
refused 1 all -I 2 -- "-I 2: expected 0 or 1"
refused 1 alltoall -I 1 -- "-I 1: alltoall has no in place"

# alltoall (not in all): every backend, 3 ranks, checked against MPI_Alltoall's table
run -np 3 "$bench" all_to_all -b 96 -e 96K -f 32 -n 2 -w 1 --backend all | tee "$work/a2a.txt"
grep -q "^# alltoall (shm): avg busbw" "$work/a2a.txt"
grep -q "#wrong total: 0" "$work/a2a.txt"

# -P places every buffer that many bytes into a page; the results are still checked
run -np 2 "$bench" all -b 64 -e 64K -f 32 -n 2 -w 1 -P 16 --backend shm | tee "$work/offset.txt"
grep -q "page offset: 16" "$work/offset.txt"
grep -q "rank 0's buffers start 16 (send) and 16 (recv) bytes into a page" "$work/offset.txt"
grep -q "#wrong total: 0" "$work/offset.txt"
# -R 1 takes every buffer from Communicator::alloc, with -P inside it too; still checked
run -np 2 "$bench" all -b 64 -e 4M -f 64 -n 2 -w 1 -R 1 -P 16 --backend all | tee "$work/node.txt"
grep -q "node buffers: 1" "$work/node.txt"
grep -q "rank 0's buffers start 16 (send) and 16 (recv) bytes into a page" "$work/node.txt"
grep -q "#wrong total: 0" "$work/node.txt"
refused 1 all -R 2 -- "-R 2: expected 0 or 1"
# asked for alone where it cannot run, nccl is a usage error with the reason: no device, or
# (2 ranks on a one-GPU machine) both ranks on the same one
if grep -q "^# backend nccl: not available: " "$work/out.txt"; then
  refused 2 allreduce -e 1K --backend nccl -- \
    "synk-bench: backend nccl: synk \(NotSupported: \|InvalidUsage: .*both use the CUDA device\)"
fi
# sizes too small for any row: a note in the table and exit 2, not an empty success
refused 2 allgather -b 4 -e 4 --backend shm -- "no row: every size from 4 to 4 B is under 2 float32"
grep -q "synk-bench: no row measured" "$work/bad.txt" || { cat "$work/bad.txt"; exit 1; }
# rows that fit in the caches get no memory-bandwidth bound (it read "reached 167%" there)
grep -q "^# allreduce (shm): no memory-bandwidth bound: the largest row (65536 B) is under" \
  "$work/offset.txt" || { echo "a bound for rows in the caches"; exit 1; }
# a run refused after the --json check leaves an existing file as it was (it was emptied)
echo '[1]' > "$work/keep.json"
refused 1 allreduce -e 1T --json "$work/keep.json" -- "do not fit in the"
[ "$(cat "$work/keep.json")" = "[1]" ] || { echo "--json emptied a file it did not write"; exit 1; }
# -r names the root of the collectives that have one; the others ignore it, as nccl-tests does
refused 2 broadcast -r 5 -- "-r 5: ROOT is out of range for 2 ranks"
run -np 2 "$bench" allreduce -b 8 -e 8 -n 1 -w 0 -r 5 --backend mpi > "$work/root.txt"
grep -q "#wrong total: 0" "$work/root.txt"
refused 1 all -P 4100 -- "-P 4100: BYTES must be a multiple of 8 from 0 to 4095"
refused 1 all -P -1 -- "-P -1: BYTES must be a multiple of 8 from 0 to 4095"

# nccl-tests' spelling names the same collective; an unknown one is refused with the list
run -np 1 "$bench" all_gather -b 64 -e 64 -n 1 -w 0 --backend shm > "$work/one.txt"
grep -q "^# allgather (shm)" "$work/one.txt"
if grep -q "handoff probe" "$work/one.txt"; then echo "a handoff probe with one rank"; exit 1; fi
refused 1 all_scatter -- "unknown collective 'all_scatter'"

"$bench" --version | grep -q "^synk-bench (synk [0-9]" || { echo "--version"; exit 1; }

set +e
run -np 2 "$bench" allreduce -d foo > "$work/bad.txt" 2>&1
rc=$?
set -e
grep -q "unknown datatype 'foo'" "$work/bad.txt" || { cat "$work/bad.txt"; exit 1; }
[ "$rc" -ne 0 ] || { echo "bad argument exited 0"; exit 1; }
echo "bench smoke passed"
