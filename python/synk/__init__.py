"""synk for Python: libsynk's collectives on NumPy arrays, in place and without a copy.

    import numpy as np, synk
    comm = synk.Communicator()            # every rank; or synk.Communicator(mpi4py_comm)
    grad = np.ones(1000, dtype=np.float32)
    comm.all_reduce(grad, op="avg")       # in place, the GIL released while it runs

Run under synkrun: build/bin/synkrun -np 2 python3 train.py
"""
from ._synk import (  # noqa: F401
    __version__,
    Communicator,
    Request,
    Error,
    InvalidArgument,
    InvalidUsage,
    NotSupported,
    System,
    Backend,
    Timeout,
    Remote,
)

__all__ = [
    "Communicator",
    "Request",
    "Error",
    "InvalidArgument",
    "InvalidUsage",
    "NotSupported",
    "System",
    "Backend",
    "Timeout",
    "Remote",
]
