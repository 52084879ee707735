#!/bin/bash
# synk-bench across hosts of the multi-host test bed (tests/multihost/testbed.sh): HOSTS
# (default hostA:2,hostB:2), one table per collective with a row per backend that runs there
# (mpi, and hier: shm inside each host, MPI between them), each beside the raw MPI call in
# the same run. The bed's hosts share this machine's cores (its ranks yield a core as soon as
# they wait, testbed.sh) and talk through veth pairs and a bridge: kernel copies, no NIC
# (docs/multihost.md). Needs root.
# Usage: benchmarks/bench_multihost.sh [BIN_DIR] [HOSTS] [synk-bench arguments...]
# (default arguments: allreduce -b 8 -e 64M --backend all)
set -u
bin=$(cd "${1:-$(dirname "$0")/../build/bin}" && pwd) || exit 2
if [ ! -x "$bin/synkrun" ]; then
  echo "bench_multihost: no $bin/synkrun (run make build first)" >&2
  exit 2
fi
hosts=${2:-hostA:2,hostB:2}
shift $(( $# < 2 ? $# : 2 ))
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(allreduce -b 8 -e 64M --backend all)
source "$(dirname "$0")/../tests/multihost/testbed.sh"
bed_require
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mapfile -t names < <(tr ',' '\n' <<< "$hosts" | cut -d: -f1)
bed_up "${names[@]}" || exit 1
trap 'bed_down' EXIT
echo "# multi-host test bed: -H $hosts, veth pairs into a bridge on this machine ($(nproc) cores)"
on_host "${names[0]}" "$bin/synkrun" -H "$hosts" "$bin/synk-bench" "${args[@]}"
