"""synk for Python: libsynk's collectives on NumPy arrays, in place and without a copy.

    import numpy as np, synk
    comm = synk.Communicator()            # every rank; or synk.Communicator(mpi4py_comm)
    grad = np.ones(1000, dtype=np.float32)
    comm.all_reduce(grad, op="avg")       # in place, the GIL released while it runs

Run under synkrun: build/bin/synkrun -np 2 python3 train.py
"""
import os as _os

from ._synk import (  # noqa: F401
    __version__,
    Communicator,
    Request,
    KeyValue,
    Updater,
    Error,
    InvalidArgument,
    InvalidUsage,
    NotSupported,
    System,
    Backend,
    Timeout,
    Remote,
)
from . import _synk
from . import objects as _objects
from ._model import world  # noqa: F401
from .data import Data  # noqa: F401
from .shared import Shared  # noqa: F401
from .function import Function, COLLECT_MODES  # noqa: F401
from .distribute import distribute, close  # noqa: F401

_objects.attach(Communicator)  # broadcast_object, all_gather_object, all_gatherv
# The thread that forks is the child's main thread, which finalizes it (python/src/no_gil.h).
_os.register_at_fork(after_in_child=_synk._note_main_thread)

__all__ = [
    "Communicator",
    "world",
    "Data",
    "Shared",
    "Function",
    "COLLECT_MODES",
    "distribute",
    "close",
    "Request",
    "KeyValue",
    "Updater",
    "Error",
    "InvalidArgument",
    "InvalidUsage",
    "NotSupported",
    "System",
    "Backend",
    "Timeout",
    "Remote",
]
