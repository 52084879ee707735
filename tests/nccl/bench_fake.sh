#!/usr/bin/env bash
# Usage: bench_fake.sh SYNK_BENCH MPIEXEC
# synk-bench's nccl rows without a GPU: the environment preloads the fake CUDA device and the fake
# NCCL (over MPI), so the device buffers, their host copies and the #wrong check of every
# collective run here. Only correctness is checked; the fake's times mean nothing.
set -euo pipefail
bench=$1 mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { "$mpiexec" --oversubscribe --allow-run-as-root --mca btl self,vader "$@"; }
# nccl_rows FILE COLL: the number of nccl rows of COLL's table, each checked with #wrong 0.
nccl_rows() {
  awk -v coll="$2" '/^# [a-z_]+: / { table = $2; sub(":", "", table) }
    table == coll && $6 == "nccl" { n++; if ($10 != 0) bad++ }
    END { if (bad) print "wrong"; else print n + 0 }' "$1"
}
expect_rows() {  # FILE COLL...
  local file=$1 coll n
  shift
  for coll in "$@"; do
    n=$(nccl_rows "$file" "$coll")
    [ "$n" != wrong ] && [ "$n" -gt 0 ] || { cat "$file"; echo "nccl rows of $coll: $n"; exit 1; }
  done
}

run -np 2 "$bench" all -b 8 -e 256K -f 8 -n 2 -w 1 --backend all --json "$work/all.json" \
  > "$work/all.txt"
grep -q "#wrong total: 0 OK" "$work/all.txt" || { cat "$work/all.txt"; exit 1; }
grep -q "^# backend nccl: synk's calls on device buffers (rank 0: cuda0)" "$work/all.txt"
expect_rows "$work/all.txt" allreduce broadcast reduce allgather reduce_scatter
python3 - "$work/all.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
nccl = [r for r in rows if r["backend"] == "nccl"]
assert len(nccl) == len([r for r in rows if r["backend"] == "shm"]), "an nccl row per shm row"
assert all(r["wrong"] == 0 and r["mpi_time_us"] for r in nccl), nccl
PY

# Rooted at 1, new input before every call (-F 1: pushed to the device each time), node
# buffers (-R 1) on the host side, another dtype and op: still every element checked.
run -np 2 "$bench" gather -b 8 -e 64K -f 64 -n 2 -w 1 -r 1 -F 1 --backend nccl > "$work/g.txt"
run -np 2 "$bench" scatter -b 8 -e 64K -f 64 -n 2 -w 1 -r 1 -R 1 --backend nccl > "$work/s.txt"
run -np 2 "$bench" reduce_scatter -b 64 -e 64K -f 64 -n 2 -w 1 -d float16 -o max \
  --backend nccl > "$work/rs.txt"
for f in g s rs; do
  grep -q "#wrong total: 0 OK" "$work/$f.txt" || { cat "$work/$f.txt"; exit 1; }
done
expect_rows "$work/g.txt" gather
expect_rows "$work/s.txt" scatter
expect_rows "$work/rs.txt" reduce_scatter
# --baseline nccl: the baseline column is raw NCCL on the same device buffers (the fake NCCL
# here), for every collective, gather, scatter and alltoall (ncclSend/ncclRecv groups) among
# them.
run -np 2 "$bench" all -b 8 -e 64K -f 64 -n 2 -w 1 --backend nccl --baseline nccl \
  --json "$work/raw.json" > "$work/raw.txt"
run -np 2 "$bench" gather -b 8 -e 64K -f 64 -n 2 -w 1 -r 1 --backend nccl --baseline nccl \
  >> "$work/raw.txt"
run -np 2 "$bench" scatter -b 8 -e 64K -f 64 -n 2 -w 1 --backend nccl --baseline nccl \
  >> "$work/raw.txt"
run -np 2 "$bench" alltoall -b 8 -e 64K -f 64 -n 2 -w 1 --backend nccl --baseline nccl \
  >> "$work/raw.txt"
grep -q "its nccl(us) column is the raw NCCL call" "$work/raw.txt" ||
  { cat "$work/raw.txt"; exit 1; }
[ "$(grep -c '^# .* nccl(us) *speedup$' "$work/raw.txt")" -eq 8 ] ||
  { cat "$work/raw.txt"; echo "not 8 tables with an nccl(us) column"; exit 1; }
awk '$6 == "nccl" && ($11 == "-" || $10 != 0) { bad = 1 } END { exit bad }' "$work/raw.txt" ||
  { cat "$work/raw.txt"; echo "an nccl row without its raw NCCL time, or wrong"; exit 1; }
grep -q "raw NCCL .* GB/s over" "$work/raw.txt" || { cat "$work/raw.txt"; exit 1; }
python3 - "$work/raw.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
assert rows and all(r["nccl_time_us"] and "mpi_time_us" not in r for r in rows), rows
PY
# It needs --backend nccl: a usage error (exit 2) otherwise.
set +e
run -np 1 "$bench" allreduce -e 64 --backend shm --baseline nccl > "$work/bad.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "baseline nccl .* needs --backend nccl" "$work/bad.txt" ||
  { cat "$work/bad.txt"; echo "--baseline nccl with shm: exit $rc"; exit 1; }

# Two ranks on one GPU (one fake device, the same PCI address for both): NCCL cannot run, so
# 'all' notes it and measures the rest, and nccl alone is a usage error (exit 2) saying why.
one_gpu() { SYNK_FAKE_DISTINCT_BUS=0 SYNK_FAKE_DEVICE_COUNT=1 run "$@"; }
one_gpu -np 2 "$bench" allreduce -b 8 -e 64 -n 1 -w 0 --backend all > "$work/shared.txt"
grep -q "^# backend nccl: not available: .*both use the CUDA device at PCI" "$work/shared.txt" ||
  { cat "$work/shared.txt"; exit 1; }
grep -q "#wrong total: 0 OK" "$work/shared.txt"
set +e
one_gpu -np 2 "$bench" allreduce -e 64 --backend nccl > "$work/alone.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { cat "$work/alone.txt"; echo "nccl on a shared GPU exited $rc, not 2"; exit 1; }
grep -q "synk-bench: backend nccl: .*both use the CUDA device" "$work/alone.txt" ||
  { cat "$work/alone.txt"; exit 1; }
echo "bench on the fake device passed"
