"""An mpi4py program that hands its own split communicator to synk and checks synk's
all_reduce, broadcast and all_gather against mpi4py's on the same arrays.

    PYTHONPATH=build/python build/bin/synkrun -np 3 python3 examples/python/mpi4py_existing.py
"""
import sys

import numpy as np
from mpi4py import MPI

import synk


def main():
    world = MPI.COMM_WORLD
    # Even and odd ranks: two communicators of the program's own.
    part = world.Split(color=world.rank % 2, key=world.rank)
    comm = synk.Communicator(part)  # synk works on its own duplicate of part
    rng = np.random.default_rng(seed=world.rank)

    grad = rng.standard_normal(10_000).astype(np.float32)
    expected = np.empty_like(grad)
    part.Allreduce(grad, expected, op=MPI.SUM)
    ok = np.allclose(comm.all_reduce(grad.copy()), expected, rtol=1e-5, atol=1e-5)

    weights = rng.standard_normal(100)
    theirs = weights.copy()
    part.Bcast(theirs, root=0)
    ok &= np.array_equal(comm.broadcast(weights, root=0), theirs)

    row = np.full(4, world.rank, dtype=np.int64)
    ok &= np.array_equal(comm.all_gather(row), np.array(part.allgather(row)))

    print(f"world rank {world.rank}: part {world.rank % 2} rank {comm.rank} of {comm.size} "
          f"on {comm.backend}: all_reduce, broadcast, all_gather "
          f"{'match mpi4py' if ok else 'DIFFER from mpi4py'}", flush=True)
    part.Free()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
