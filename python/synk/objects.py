"""Python objects and rows of any count across the ranks, as Horovod's broadcast_object and
allgather, and mpi4py's lowercase bcast and allgather, give them.

An object travels pickled, as NumPy bytes, through the array collectives: broadcast_object makes
two broadcasts (the length, then the bytes), all_gather_object two all_gathers (the lengths,
then the bytes padded to the longest), all_gatherv a gatherv to rank 0 and a broadcast. A rank
that cannot pickle its object raises its own error, and the others raise synk.Remote naming it,
so that none is left waiting.
"""
import pickle

import numpy as np

from ._synk import Remote

_CANNOT_PICKLE = -1  # a length that says the rank's object could not be pickled


def _pickled(obj):
    """(bytes as a uint8 array, None), or (None, the exception) where obj cannot be pickled."""
    try:
        return np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), np.uint8), None
    except Exception as e:  # pickle raises many types: PicklingError, TypeError, ...
        return None, e


def broadcast_object(comm, obj, root=0):
    """The root's obj on every rank (the root gets obj itself, the others an unpickled copy)."""
    data, error = _pickled(obj) if comm.rank == root else (None, None)
    length = np.array([_CANNOT_PICKLE if error else (0 if data is None else data.size)],
                      np.int64)
    comm.broadcast(length, root=root)
    if comm.rank == root:
        if error:
            raise error
        comm.broadcast(data, root=root)
        return obj
    if length[0] == _CANNOT_PICKLE:
        raise Remote(f"broadcast_object: the root, rank {root}, could not pickle its object")
    data = np.empty(int(length[0]), np.uint8)
    comm.broadcast(data, root=root)
    return pickle.loads(data.tobytes())


def all_gather_object(comm, obj):
    """A list of every rank's obj, in rank order (this rank's own is obj itself)."""
    data, error = _pickled(obj)
    lengths = comm.all_gather(np.array([_CANNOT_PICKLE if error else data.size], np.int64))
    lengths = lengths.reshape(-1)
    if error:
        raise error
    failed = [r for r in range(comm.size) if lengths[r] == _CANNOT_PICKLE]
    if failed:
        raise Remote(f"all_gather_object: rank {failed[0]} could not pickle its object")
    padded = np.zeros(int(lengths.max()), np.uint8)
    padded[: data.size] = data
    blocks = comm.all_gather(padded)
    return [obj if r == comm.rank else pickle.loads(blocks[r, : lengths[r]].tobytes())
            for r in range(comm.size)]


def all_gatherv(comm, a):
    """Every rank's rows of `a` (any number, one trailing shape and dtype), concatenated in rank
    order along the first axis, on every rank: Horovod's allgather. A new array."""
    a = np.asarray(a)
    gathered = comm.gatherv(a, root=0)  # agrees rows, trailing size and dtype on every rank
    rows = np.array([gathered.shape[0] if comm.rank == 0 else 0], np.int64)
    comm.broadcast(rows, root=0)
    out = gathered if comm.rank == 0 else np.empty((int(rows[0]),) + a.shape[1:], a.dtype)
    return comm.broadcast(out, root=0)


def attach(cls):
    """Adds the functions above to synk.Communicator as methods."""
    cls.broadcast_object = broadcast_object
    cls.all_gather_object = all_gather_object
    cls.all_gatherv = all_gatherv
