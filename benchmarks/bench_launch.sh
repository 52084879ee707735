#!/bin/bash
# Launch overhead of synkrun against plain mpirun: `synkrun -np 2 /bin/true` and
# `mpirun -np 2 /bin/true`, RUNS runs each (default 10), median wall time of each and the ratio.
# Usage: benchmarks/bench_launch.sh [path/to/synkrun, or its bin directory] [runs]
set -eu
synkrun=${1:-$(dirname "$0")/../build/bin/synkrun}
[ -d "$synkrun" ] && synkrun=$synkrun/synkrun  # the bin directory, as the other scripts take
runs=${2:-10}
usage_error() { echo "bench_launch: $*" >&2; exit 2; }
[ -x "$synkrun" ] || usage_error "no $synkrun (run make build first)"
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || usage_error "runs must be a whole number from 1, not '$runs'"
mpirun=$(command -v mpirun) || usage_error "no mpirun on PATH (apt-get install openmpi-bin)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader

# Prints the wall time of one run of "$@", in seconds; a run that fails ends the script, saying
# so (inside $(...) set -e does not act, and a failed run was timed as if it had run).
time_once() {
  local t0 t1
  t0=$(date +%s.%N)
  if ! "$@" >/dev/null 2>&1; then
    echo "bench_launch: '$*' failed (run it alone to see why)" >&2
    exit 1
  fi
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Interleaved, after one warm-up each, so both see the same machine load.
time_once "$synkrun" -np 2 /bin/true >/dev/null
time_once "$mpirun" -np 2 /bin/true >/dev/null
s_times=() m_times=()
for ((i = 0; i < runs; i++)); do
  t=$(time_once "$synkrun" -np 2 /bin/true) || exit 1
  s_times+=("$t")
  t=$(time_once "$mpirun" -np 2 /bin/true) || exit 1
  m_times+=("$t")
done
s=$(printf '%s\n' "${s_times[@]}" | median)
m=$(printf '%s\n' "${m_times[@]}" | median)
printf 'launch, %d runs each, median wall time:\n' "$runs"
printf '  synkrun -np 2 /bin/true   %.4f s\n' "$s"
printf '  mpirun  -np 2 /bin/true   %.4f s\n' "$m"
awk -v s="$s" -v m="$m" 'BEGIN { printf "  ratio synkrun/mpirun      %.2f\n", s / m }'
