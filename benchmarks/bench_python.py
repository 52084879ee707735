"""all_reduce from Python against the C++ call it wraps and against mpi4py, on the same NumPy
float32 arrays in one process: synk's binding (comm.all_reduce(a, out=out)), the same C++ call
in a C++ loop (synk._time_all_reduce, synk-bench's loop), and mpi4py's comm.Allreduce. Per
size: a warm-up and synk-bench's settle, then 9 rounds that each time the three sides one after
another, each side's calls after a synk barrier (2,000 calls up to 64 KiB, at least ITERS);
the median of the rounds.

    PYTHONPATH=build/python build/bin/synkrun -np 2 python3 benchmarks/bench_python.py [--iters 20]

Prints one row per size on rank 0: the median time per call of each side in us, what the
binding adds to the C++ call (the medians' difference, and the median of the rounds' ratios),
and mpi4py over synk from Python (the median of the rounds' ratios).
"""
import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import synk

SIZES = [8, 64 * 1024, 64 * 1024 * 1024]


def time_synk(comm, calls, a, out):
    """us per call of comm.all_reduce(a, out=out) in a plain loop, as a user writes it."""
    all_reduce = comm.all_reduce
    comm.barrier()  # synk's, as the C++ loop's: the same skew at the start of every side
    start = time.perf_counter()
    for _ in range(calls):
        all_reduce(a, out=out)
    return (time.perf_counter() - start) / calls * 1e6


def time_mpi4py(comm, world, calls, a, out):
    """The same of mpi4py's world.Allreduce(a, out)."""
    allreduce = world.Allreduce
    comm.barrier()
    start = time.perf_counter()
    for _ in range(calls):
        allreduce(a, out)
    return (time.perf_counter() - start) / calls * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    world = MPI.COMM_WORLD
    comm = synk.Communicator()
    if world.rank == 0:
        print(f"# bench_python: {world.size} ranks, synk backend {comm.backend}, "
              f"numpy {np.__version__}, mpi4py {MPI.Get_library_version().splitlines()[0]}")
        print(f"{'size(B)':>12} {'synk C++(us)':>13} {'synk py(us)':>12} {'py-C++(us)':>11} "
              f"{'py/C++':>7} {'mpi4py(us)':>11} {'mpi4py/py':>10}")
    for size in SIZES:
        a = np.ones(size // 4, dtype=np.float32)
        out = np.empty_like(a)
        # Enough calls that a round outlasts the barrier's skew (2,000 up to 64 KiB).
        calls = max(args.iters, min(2000, int(2e8 // size)))
        # Warm-up, then synk-bench's settle: up to 155 more calls a side, as many as fit in
        # 0.25 s (the shm backend measures its ways of large calls in calls 65-128 of a size).
        for _ in range(5):
            comm.all_reduce(a, out=out)
            world.Allreduce(a, out)
        settle = 155 if size * 155 < 2e9 else 1
        for call in (lambda: comm.all_reduce(a, out=out), lambda: world.Allreduce(a, out)):
            deadline = time.perf_counter() + 0.25
            for _ in range(settle):
                call()
                if world.allreduce(time.perf_counter() > deadline, op=MPI.LOR):
                    break
        cpp_us, synk_us, mpi_us = [], [], []
        for _ in range(9):
            for _ in range(min(calls, 200)):  # back from MPI's side: synk's memory warm again
                comm.all_reduce(a, out=out)
            cpp_us.append(synk._synk._time_all_reduce(comm, a, out, calls) * 1e6)
            synk_us.append(time_synk(comm, calls, a, out))
            mpi_us.append(time_mpi4py(comm, world, calls, a, out))
        c, s, m = (statistics.median(v) for v in (cpp_us, synk_us, mpi_us))
        # The ratios are medians of each round's own ratio: a round's sides run back to back,
        # on the same host state, where rounds differ by up to 2x on a shared VM.
        py_cpp = statistics.median(y / x for x, y in zip(cpp_us, synk_us))
        mpi_py = statistics.median(z / y for y, z in zip(synk_us, mpi_us))
        if world.rank == 0:
            print(f"{size:>12} {c:>13.2f} {s:>12.2f} {s - c:>11.2f} {py_cpp:>7.3f} {m:>11.2f} "
                  f"{mpi_py:>10.2f}")


if __name__ == "__main__":
    main()
