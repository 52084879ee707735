"""A list of arrays from Python: comm.grouped_all_reduce against one comm.all_reduce per array
and one mpi4py Allreduce per array, on the same float32 arrays, avg (mpi4py: sum, then a
multiply by 1/size, as Horovod's average). Two lists: 300 arrays of 256 elements (a model's
many small tensors, as synk-bench-shared-list), and the six of train_fmnist's MLP
(784x256, 256, 256x128, 128, 128x10, 10). Per list: a warm-up, then ROUNDS rounds that each
time the three sides one after another, each after a synk barrier; the median of the rounds.

    PYTHONPATH=build/python build/bin/synkrun -np 2 python3 benchmarks/bench_grouped.py [--rounds 9]

Prints on rank 0 one row per list: the median time per step of each side in us, and the medians
of the rounds' ratios one-by-one/grouped and mpi4py/grouped. A last grouped step on values that
differ by rank and by array is checked: exit 1 where an element is wrong.
"""
import argparse
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import synk

LISTS = {
    "300 x 256": [(256,)] * 300,
    "MLP (6)": [(784, 256), (256,), (256, 128), (128,), (128, 10), (10,)],
}


def step_us(comm, fn, steps):
    """us per step of fn() in a plain loop, after a synk barrier."""
    comm.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps * 1e6


def sides(comm, world, arrays):
    """The three ways to average the list, each a function of no arguments."""
    scale = np.float32(1.0 / world.size)

    def one_by_one():
        for a in arrays:
            comm.all_reduce(a, "avg")

    def mpi4py():
        for a in arrays:
            world.Allreduce(MPI.IN_PLACE, a)
            a *= scale

    return {"grouped": lambda: comm.grouped_all_reduce(arrays, "avg"),
            "one by one": one_by_one, "mpi4py": mpi4py}


def check(comm, world, arrays):
    """One more grouped step on values that differ by rank and by array (rank + 1 + i in array
    i): every element must be their average, (size + 1) / 2 + i. The wrong elements of every
    rank."""
    for i, a in enumerate(arrays):
        a[...] = world.rank + 1 + i
    comm.grouped_all_reduce(arrays, "avg")
    want = [(world.size + 1) / 2 + i for i in range(len(arrays))]
    wrong = sum(int(np.count_nonzero(~np.isclose(a, w, rtol=1e-6))) for a, w in zip(arrays, want))
    return world.allreduce(wrong)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--steps", type=int, default=50, help="steps per side in a round")
    args = p.parse_args()
    world = MPI.COMM_WORLD
    comm = synk.Communicator()
    if world.rank == 0:
        print(f"# bench_grouped: {world.size} ranks, synk backend {comm.backend}, avg of float32")
        print(f"{'list':>10} {'grouped(us)':>12} {'1-by-1(us)':>11} {'mpi4py(us)':>11} "
              f"{'1-by-1/grouped':>15} {'mpi4py/grouped':>15} {'#wrong':>7}")
    all_wrong = 0
    for name, shapes in LISTS.items():
        arrays = [np.ones(s, np.float32) for s in shapes]
        fns = sides(comm, world, arrays)
        for fn in fns.values():
            fn()  # warm-up
        times = {k: [] for k in fns}
        for _ in range(args.rounds):
            for k, fn in fns.items():
                times[k].append(step_us(comm, fn, args.steps))
        wrong = check(comm, world, arrays)
        all_wrong += wrong
        if world.rank == 0:
            med = {k: statistics.median(v) for k, v in times.items()}
            ratio = {k: statistics.median(t / g for t, g in zip(times[k], times["grouped"]))
                     for k in ("one by one", "mpi4py")}
            print(f"{name:>10} {med['grouped']:12.1f} {med['one by one']:11.1f} "
                  f"{med['mpi4py']:11.1f} {ratio['one by one']:15.2f} {ratio['mpi4py']:15.2f} "
                  f"{wrong:7d}", flush=True)
    return 1 if all_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
