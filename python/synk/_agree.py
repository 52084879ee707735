"""What the ranks agree on before they go on, so that an error on one rank is an error on all of
them, and nobody is left waiting in a collective the others never reach."""
import pickle

import numpy as np

from . import _synk


def error(cls, message):
    """An exception of synk's class `cls` whose text reads like libsynk's own."""
    return cls("synk %s: %s" % (cls.__name__, message))


class _Refused:
    """What a root sends in place of an object it could not send: why."""

    def __init__(self, text):
        self.text = text


def bcast_object(comm, obj, root, what):
    """The root's picklable `obj` on every rank (ignored elsewhere): its size, then its bytes.
    Where the root cannot pickle it, every rank raises InvalidArgument. `what` names the call
    it is part of ("Data", "distribute"): two ranks in different calls, whose broadcasts would
    pair up unseen, get InvalidUsage naming both (on the ranks that receive)."""
    size = np.zeros(1, np.int64)
    if comm.rank == root:
        try:
            payload = pickle.dumps((what, obj), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001 - any pickling failure is refused alike
            payload = pickle.dumps((what, _Refused("rank %d could not send a %s: %s"
                                                   % (root, type(obj).__name__, e))))
        size[0] = len(payload)  # `what` travels in the payload, compared below
    comm.broadcast(size, root)
    if comm.rank == root:
        buf = np.frombuffer(payload, np.uint8).copy()
    else:
        buf = np.empty(int(size[0]), np.uint8)
    comm.broadcast(buf, root)
    theirs, got = pickle.loads(buf.tobytes())
    if theirs != what:
        raise error(_synk.InvalidUsage,
                    "the ranks are in different calls: rank %d in %s, rank %d in %s (every rank "
                    "makes the same calls, and the same Data, Shared and Function objects in the "
                    "same order)" % (root, theirs, comm.rank, what))
    if isinstance(got, _Refused):
        raise error(_synk.InvalidArgument, got.text)
    return got


def first_failure(comm, failed, text=""):
    """(rank, text) of the first rank where `failed` is true, its `text` reaching every rank;
    None where no rank failed. One all_reduce, and a broadcast only after a failure."""
    first = np.array([comm.rank if failed else comm.size], np.int64)
    comm.all_reduce(first, op="min")
    if first[0] == comm.size:
        return None
    rank = int(first[0])
    return rank, bcast_object(comm, text, rank, "the agreement on a failure")


def check_root(comm, who, root):
    """InvalidArgument on every rank (the arguments are the same everywhere) unless root is a
    rank of comm."""
    if not isinstance(root, (int, np.integer)) or isinstance(root, bool):
        raise error(_synk.InvalidArgument, "%s: the rank must be an int, not %s"
                    % (who, type(root).__name__))
    if not 0 <= root < comm.size:
        raise error(_synk.InvalidArgument,
                    "%s: rank %d is out of range for %d ranks" % (who, root, comm.size))
    return int(root)


def dtype_code(dtype):
    """A number per dtype, the same on every rank (for an all_reduce that compares them). Byte
    order counts: '>f4' and '<f4' are other numbers in the same bytes."""
    return (ord(dtype.kind) * 1000 + dtype.itemsize) * 2 + (not dtype.isnative)


def dtype_of_code(code):
    """The dtype dtype_code gave `code`."""
    kind_and_size, foreign = divmod(int(code), 2)
    dtype = np.dtype("%s%d" % (chr(kind_and_size // 1000), kind_and_size % 1000))
    return dtype.newbyteorder("S") if foreign else dtype


def byte_order_problem(dtype, name="value"):
    """Why synk cannot take an array of `dtype` (named `name`): not in this machine's byte order,
    in which synk reads every array (a dtype of single bytes has none); None where it can."""
    if dtype.isnative:
        return None
    return ("%s has dtype %s, which is not in this machine's byte order: synk would read other "
            "numbers. Pass %s.astype(%s.dtype.newbyteorder('=')) instead"
            % (name, dtype.str, name, name))


def check_native(dtype, who, name="value"):
    """InvalidArgument "<who>: <why>" where byte_order_problem finds one."""
    why = byte_order_problem(dtype, name)
    if why is not None:
        raise error(_synk.InvalidArgument, "%s: %s" % (who, why))


def describe(e):
    """An exception as "Timeout: its text", or as "KeyboardInterrupt" where it has no text."""
    text = str(e)
    return "%s: %s" % (type(e).__name__, text) if text else type(e).__name__
