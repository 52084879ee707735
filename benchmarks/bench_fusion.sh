#!/bin/bash
# KeyValue's tensor fusion on NP ranks (default 2), one table: per step 1,000 keys of 4 KiB pushed
# and pulled through synk::KeyValue, fused (synk's default SYNK_FUSION_BYTES) and unfused
# (SYNK_FUSION_BYTES=0: one collective per key), against 1,000 blocking comm.all_reduce and
# 1,000 MPI_Allreduce of 4 KiB. SYNK_FUSION_BYTES is read once per process, so the unfused row
# comes from a second run; each row's vs_mpi is against the MPI_Allreduce timed in its own run.
# The issue's target: fused at least 5x faster than MPI.
# Usage: benchmarks/bench_fusion.sh [path/to/bin] [np] [extra bench_fusion args...]
# (every bench_fusion argument but --modes, which the script sets)
# SYNKRUN_ARGS: options for synkrun (e.g. "--bind core" on a node with fewer GPUs than ranks).
set -eu
bin=${1:-$(dirname "$0")/../build/bin}
np=${2:-2}
shift $(($# < 2 ? $# : 2))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset SYNK_FUSION_BYTES
source "$(dirname "$0")/require_tools.sh"
require_tools "$bin" synkrun bench_fusion

echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
rc=0  # a run with a wrong element (exit 1) still shows its rows, then fails the script
synkrun=("$bin/synkrun" ${SYNKRUN_ARGS:-})
fused=$("${synkrun[@]}" -np "$np" "$bin/bench_fusion" --modes kv,all_reduce,mpi "$@") || rc=$?
unfused=$(SYNK_FUSION_BYTES=0 "${synkrun[@]}" -np "$np" "$bin/bench_fusion" --modes kv \
  --no-header "$@") || rc=$?
# One table, in the order of the issue: fused, unfused, all_reduce, MPI (a run that failed
# before its rows leaves them out, and the script ends with its exit code).
grep -E '^(#|mode )' <<< "$fused" || true
grep '^kv fused' <<< "$fused" || true
grep '^kv unfused' <<< "$unfused" || true
grep -E '^(all_reduce|MPI_Allreduce) ' <<< "$fused" || true
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$rc"
