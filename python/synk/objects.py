"""Python objects and rows of any count across the ranks, as Horovod's broadcast_object and
allgather, and mpi4py's lowercase bcast and allgather, give them.

An object travels pickled, as NumPy bytes, through the array collectives: broadcast_object makes
two broadcasts (the length, then the bytes), all_gather_object two all_gathers (the lengths,
then the bytes padded to the longest), all_gatherv a gatherv to rank 0 and a broadcast. Where a
rank cannot pickle its object, every rank raises synk.InvalidArgument saying why, none is left
waiting.
"""
import pickle

import numpy as np

from . import _synk
from ._agree import bcast_object, error

_CANNOT_PICKLE = -1  # the length a rank gives for an object it could not pickle


def broadcast_object(comm, obj, root=0):
    """The root's obj on every rank (the root gets obj itself, the others an unpickled copy)."""
    got = bcast_object(comm, obj, root, "broadcast_object")
    return obj if comm.rank == root else got


def all_gather_object(comm, obj):
    """A list of every rank's obj, in rank order (this rank's own is obj itself)."""
    try:
        data, why = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), np.uint8), ""
    except Exception as e:  # noqa: BLE001 - any pickling failure is refused alike
        data, why = None, "rank %d could not send a %s: %s" % (comm.rank, type(obj).__name__, e)
    mine = np.array([_CANNOT_PICKLE if data is None else data.size], np.int64)
    lengths = comm.all_gather(mine).reshape(-1)
    failed = [r for r in range(comm.size) if lengths[r] == _CANNOT_PICKLE]
    if failed:  # the first failing rank's reason, on every rank
        raise error(_synk.InvalidArgument,
                    bcast_object(comm, why, failed[0], "all_gather_object's failure"))
    padded = np.zeros(int(lengths.max()), np.uint8)
    padded[: data.size] = data
    blocks = comm.all_gather(padded)
    return [obj if r == comm.rank else pickle.loads(blocks[r, : lengths[r]].tobytes())
            for r in range(comm.size)]


_MAX_DIMS = 64  # NumPy's most


def all_gatherv(comm, a):
    """Every rank's rows of `a` (any number, one trailing size and dtype), concatenated in rank
    order along the first axis, on every rank: Horovod's allgather. A new array, of rank 0's
    trailing shape on every rank."""
    a = np.asarray(a)
    gathered = comm.gatherv(a, root=0)  # agrees rows, trailing size and dtype on every rank
    shape = np.zeros(1 + _MAX_DIMS, np.int64)  # rank 0's: the number of axes, then each
    if comm.rank == 0:
        shape[0] = gathered.ndim
        shape[1:1 + gathered.ndim] = gathered.shape
    comm.broadcast(shape, root=0)
    out = gathered if comm.rank == 0 else np.empty(tuple(shape[1:1 + shape[0]]), a.dtype)
    return comm.broadcast(out, root=0)


def attach(cls):
    """Adds the functions above to synk.Communicator as methods."""
    cls.broadcast_object = broadcast_object
    cls.all_gather_object = all_gather_object
    cls.all_gatherv = all_gatherv
