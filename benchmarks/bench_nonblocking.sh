#!/bin/bash
# Blocking against non-blocking all_reduce on one backend, 2 ranks: ROUNDS alternated launches of
# synk-bench per variant, the medians per size, and the ratios of times (the median, and the
# range, of the ratios of launches made one after the other). Variants: the blocking call (-N 0)
# and issue-then-wait (-N 1) under a plain MPI_Init; on mpi also both under
# --mpi-threads multiple, where the non-blocking calls run on synk's progress thread (under a
# plain MPI_Init they run at issue).
# Usage: benchmarks/bench_nonblocking.sh [path/to/bin] [mpi|shm] [rounds] [synk-bench args...]
# The default sizes: -b 8 -e 16M -f 16. SYNKRUN_ARGS: options for synkrun.
set -eu
bin=${1:-$(dirname "$0")/../build/bin}
backend=${2:-mpi}
rounds=${3:-7}
shift $(($# < 3 ? $# : 3))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(-b 8 -e 16M -f 16)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

variants=("blocking:-N 0" "nonblocking:-N 1")
if [ "$backend" = mpi ]; then
  variants+=("blocking_threads:-N 0 --mpi-threads multiple"
             "nonblocking_threads:-N 1 --mpi-threads multiple")
fi
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
echo "# synk-bench allreduce ${sizes[*]} --backend $backend, $rounds alternated launches per variant"
for r in $(seq "$rounds"); do
  for v in "${variants[@]}"; do
    # shellcheck disable=SC2086  # the variant's options are words
    "$bin/synkrun" ${SYNKRUN_ARGS:-} -np 2 "$bin/synk-bench" allreduce "${sizes[@]}" \
      --backend "$backend" ${v#*:} > "$work/out" 2>&1 || { cat "$work/out"; exit 1; }
    grep -q "#wrong total: 0" "$work/out" || { cat "$work/out"; exit 1; }
    grep -E '^ +[0-9]' "$work/out" > "$work/${v%%:*}.$r"
  done
done
names=()
for v in "${variants[@]}"; do names+=("${v%%:*}"); done
python3 - "$work" "$rounds" "${names[@]}" <<'PY'
import statistics, sys
work, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = {}  # size -> name -> [(synk us, mpi us) per launch]
for name in names:
    for r in range(1, rounds + 1):
        for line in open(f"{work}/{name}.{r}"):
            f = line.split()
            rows.setdefault(int(f[0]), {}).setdefault(name, []).append((float(f[6]), float(f[10])))
med = lambda xs: statistics.median(xs)
# Each non-blocking variant over the blocking one at the same thread level, and the blocking
# call with threads over the one without (what MPI_THREAD_MULTIPLE costs).
pairs = [(n, names[0] if "threads" not in n or n.startswith("blocking") else "blocking_threads")
         for n in names[1:]]
print("| size (B) | " + " | ".join(f"{n} (us)" for n in names) + " | " +
      " | ".join(f"{a} / {b}" for a, b in pairs) + " | MPI column (us), per variant |")
print("|" + "---|" * (len(names) + len(pairs) + 2))
for size, by in sorted(rows.items()):
    times = " | ".join(f"{med(t for t, _ in by[n]):.2f}" for n in names)
    ratios = []
    for a, b in pairs:
        r = [x / y for (x, _), (y, _) in zip(by[a], by[b])]
        ratios.append(f"{med(r):.2f} ({min(r):.2f}-{max(r):.2f})")
    mpi = " / ".join(f"{med(m for _, m in by[n]):.2f}" for n in names)
    print(f"| {size} | {times} | {' | '.join(ratios)} | {mpi} |")
PY
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
