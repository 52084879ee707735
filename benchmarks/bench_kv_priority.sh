#!/bin/bash
# A top-priority KeyValue key pushed while a large low-priority key is reduced, on NP ranks
# (default 2), one table: a row per SYNK_PARTITION_BYTES (0: whole keys; then 1 MiB, synk's
# default 4 MiB and 16 MiB), each from its own run (the setting is read once per process), each
# with its own MPI_Allreduce of the large key beside it.
# Usage: benchmarks/bench_kv_priority.sh [path/to/bin] [np] [extra bench_kv_priority args...]
# SYNKRUN_ARGS: options for synkrun (e.g. "--bind core" on a node with fewer GPUs than ranks).
set -eu
bin=${1:-$(dirname "$0")/../build/bin}
np=${2:-2}
shift $(($# < 2 ? $# : 2))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source "$(dirname "$0")/require_tools.sh"
require_tools "$bin" synkrun bench_kv_priority

echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
rc=0  # a run with a wrong element (exit 1) still shows its row, then fails the script
synkrun=("$bin/synkrun" ${SYNKRUN_ARGS:-})
header=()
for part in 0 1048576 4194304 16777216; do
  SYNK_PARTITION_BYTES=$part "${synkrun[@]}" -np "$np" "$bin/bench_kv_priority" "${header[@]}" \
    "$@" || rc=$?
  header=(--no-header)
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$rc"
