"""all_reduce from Python: synk's binding against mpi4py's comm.Allreduce on the same NumPy
float32 arrays, in one run, in synk-bench's way (per size: warm-up and settle, then 9 rounds
that time ITERS calls of each side back to back after a barrier; the median of the rounds).

    build/bin/synkrun -np 2 python3 benchmarks/bench_python.py [--iters 20]
    build/bin/synkrun -np 2 build/bin/synk-bench allreduce -b 8 -e 64M   # the C++ call

Prints one row per size on rank 0: the median time per call of each side in us and their ratio.
"""
import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import synk

SIZES = [8, 64 * 1024, 64 * 1024 * 1024]


def timed(comm, calls, call):
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(calls):
        call()
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
        print(f"{'size(B)':>12} {'synk py(us)':>12} {'mpi4py(us)':>12} {'mpi4py/synk':>12}")
    for size in SIZES:
        a = np.ones(size // 4, dtype=np.float32)
        out = np.empty_like(a)
        calls = max(1, min(args.iters, int(2e8 // max(size, 1))))
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
        synk_us, mpi_us = [], []
        for _ in range(9):
            synk_us.append(timed(world, calls, lambda: comm.all_reduce(a, out=out)))
            mpi_us.append(timed(world, calls, lambda: world.Allreduce(a, out)))
        s, m = statistics.median(synk_us), statistics.median(mpi_us)
        if world.rank == 0:
            print(f"{size:>12} {s:>12.2f} {m:>12.2f} {m / s:>12.2f}")


if __name__ == "__main__":
    main()
