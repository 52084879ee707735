"""synk.Shared, after Synkhronos's shared variables: an array on every rank (each rank holds its
own value, of its own shape) with collectives over the ranks' values. Every collective is made
by every rank, in the same order (after distribute(), by the master alone)."""
import numpy as np

from . import _synk
from . import _batch
from ._agree import bcast_object, byte_order_problem, check_native, check_root, dtype_code, error, first_failure
from ._model import driven, registry


class Shared:
    """Shared(value=None, *, dtype=None, comm=None, name=None): this rank's value (a copy of
    `value`, C-contiguous; an empty float32 array where None)."""

    def __init__(self, value=None, *, dtype=None, comm=None, name=None):
        reg = registry(comm)
        self._registry = reg
        # Refused before the workers hear of it (set_local refuses it too).
        if dtype is not None and not np.dtype(dtype).isnative:
            raise error(_synk.InvalidArgument,
                        "Shared: dtype=%r is not in this machine's byte order: synk would read "
                        "other numbers. Pass dtype=np.dtype(%r).newbyteorder('=') instead"
                        % (np.dtype(dtype).str, np.dtype(dtype).str))
        if dtype is None and isinstance(getattr(value, "dtype", None), np.dtype):
            check_native(value.dtype, "Shared")
        if reg.drives():  # made by the master alone: the workers make it with its value
            reg.driver.drive(("new", Shared, dict(value=value, dtype=dtype, name=name)),
                             lambda: self._make(value, dtype, name))
            reg.driver.made_here(self)
        else:
            self._make(value, dtype, name)

    def _make(self, value, dtype, name):
        self.set_local(np.zeros(0, np.float32) if value is None else value, dtype)
        self._id = self._registry.add(self)
        self.name = name if name is not None else "shared_%d" % self._id

    def _describe(self):
        return "'%s'" % self.name

    @property
    def _comm(self):
        return self._registry.comm

    def _who(self, op):
        return "Shared '%s' %s" % (self.name, op)

    # ---- this rank's value ----

    @property
    def value(self):
        """This rank's value: its own array, which the collectives below change in place where
        its shape and dtype stay."""
        return self._value

    @value.setter
    def value(self, value):
        self.set_local(value)

    @property
    def shape(self):
        return self._value.shape

    @property
    def dtype(self):
        return self._value.dtype

    def set_local(self, value, dtype=None):
        """This rank's value becomes a C-contiguous copy of `value`, of a dtype in this machine's
        byte order (another is an InvalidArgument: synk would read other numbers)."""
        value = np.array(value, dtype=dtype, order="C", copy=True)
        check_native(value.dtype, "Shared")
        self._value = value

    # ---- collectives ----

    @driven("value", refuse=lambda self, a: a["value"] is not None and a["root"] != 0 and
             "%s: a value with root %r: after distribute() only the master (root 0) gives one"
             % (self._who("broadcast"), a["root"]))
    def broadcast(self, value=None, root=0):
        """The root's value (and shape and dtype) on every rank; where `value` is given, the
        root's value becomes it first."""
        root = check_root(self._comm, self._who("broadcast"), root)
        mine, refused = self._value, None
        if value is not None and self._comm.rank == root:
            try:
                mine = np.array(value, order="C", copy=True)
                refused = byte_order_problem(mine.dtype)
            except Exception as e:  # noqa: BLE001 - refused on every rank, below
                refused = "%s" % e
        self._value = self._from_root(mine, root, "broadcast", refused)  # unchanged if refused

    @driven()
    def all_reduce(self, op="avg"):
        """Every rank's value becomes the reduction over the ranks (in place). The ranks first
        check that their values have one shape and dtype (a small all_gather): a mismatch
        would otherwise be a different call on each rank."""
        self._same_layout("all_reduce")
        self._comm.all_reduce(self._value, op=op)

    @driven()
    def reduce(self, op="avg", root=0):
        """The root's value becomes the reduction; the others keep theirs."""
        root = check_root(self._comm, self._who("reduce"), root)
        self._same_layout("reduce")
        self._comm.reduce(self._value, op=op, root=root)

    @driven(refuse=lambda self, a: _result_for_a_worker(self, "reduced", a["root"]))
    def reduced(self, op="avg", root=0):
        """The reduction, returned at the root (None elsewhere); no value changes."""
        root = check_root(self._comm, self._who("reduced"), root)
        self._same_layout("reduced")
        out = np.empty_like(self._value) if self._comm.rank == root else None
        return self._comm.reduce(self._value, op=op, root=root, out=out)

    @driven(refuse=lambda self, a: _result_for_a_worker(self, "gather", a["root"]))
    def gather(self, nd_up=1, root=0):
        """Every rank's value at the root (None elsewhere): nd_up=1 stacks them (shape
        (size, ...), one shape on every rank); nd_up=0 joins them along axis 0."""
        root = check_root(self._comm, self._who("gather"), root)
        rows, shape = self._joined(nd_up)
        out = self._comm.gatherv(rows, root)
        return None if out is None else out.reshape(shape)

    @driven()
    def all_gather(self, nd_up=1):
        """gather, on every rank."""
        rows, shape = self._joined(nd_up)
        out = self._comm.gatherv(rows, 0)
        if out is None:
            out = np.empty((shape[0],) + rows.shape[1:], rows.dtype)
        return self._comm.broadcast(out, 0).reshape(shape)

    @driven()
    def scatter(self, root=0, *, data=None, batch=None):
        """The root's value split along axis 0 at linspace boundaries: rank r's value becomes
        rows [r*n/size, (r+1)*n/size). With data (a synk.Data), each rank's value becomes its
        share of the batch's rows of data, read from the node's copy: nothing travels."""
        if data is not None:
            self._scatter_from(data, batch)
            return
        root = check_root(self._comm, self._who("scatter"), root)
        comm = self._comm
        shape, dtype = self._root_layout(root, "scatter", need_rows=True)
        n = shape[0]
        counts = [n * (r + 1) // comm.size - n * r // comm.size for r in range(comm.size)]
        send = self._value if comm.rank == root else np.empty((0,) + shape[1:], dtype)
        self._value = comm.scatterv(send, counts, root)

    def _scatter_from(self, data, batch):
        # No collective reads the rows, so the ranks agree on a failure after it: without this
        # a rank that failed (a worker, after distribute()) would fail alone, unseen.
        mine, value = None, None
        try:
            value = np.array(data.take(batch), order="C", copy=True)
            check_native(value.dtype, self._who("scatter"), "data")
        except Exception as e:  # noqa: BLE001 - every rank hears of it below
            mine = e
        failed = first_failure(self._comm, mine is not None,
                               "" if mine is None else "%s: %s" % (type(mine).__name__, mine))
        if mine is not None:
            raise mine
        if failed:
            raise error(_synk.Remote, "%s: rank %d failed: %s" % (self._who("scatter"), *failed))
        self._value = value

    @driven()
    def get_value(self, rank):
        """Rank `rank`'s value, returned on every rank (after distribute(), on the master)."""
        rank = check_root(self._comm, self._who("get_value"), rank)
        return self._from_root(self._value.copy() if self._comm.rank == rank else None, rank,
                               "get_value")

    @driven("value")
    def set_value(self, rank, value):
        """Rank `rank`'s value becomes `value` as given on rank 0 (after distribute(), the
        master)."""
        rank = check_root(self._comm, self._who("set_value"), rank)
        given, refused = None, None
        if self._comm.rank == 0:
            try:
                given = np.array(value, order="C", copy=True)
                refused = byte_order_problem(given.dtype)
            except Exception as e:  # noqa: BLE001 - refused on every rank, below
                refused = "%s" % e
        got = self._from_root(given, 0, "set_value", refused)
        if self._comm.rank == rank:
            self._value = got

    @driven()
    def get_shapes(self):
        """Every rank's shape, on every rank."""
        return self._all_layouts("get_shapes")[0]

    # ---- helpers ----

    def _root_layout(self, root, op, need_rows=False, value=None, refused=None):
        """The (shape, dtype) of the root's `value` (default: its value) on every rank; every
        rank raises where it has none, or where the root gives why not (`refused`)."""
        layout = None
        if self._comm.rank == root:
            v = self._value if value is None else value
            if refused is not None:
                layout = refused
            elif v.dtype.kind not in "biuf":
                layout = "dtype %s, which synk has no type for" % v.dtype
            elif need_rows and v.ndim == 0:
                layout = "a 0-d value has no rows to split"
            else:
                layout = (v.shape, v.dtype.str)
        layout = bcast_object(self._comm, layout, root, "Shared " + op)  # names may differ
        if isinstance(layout, str):
            raise error(_synk.InvalidArgument, "%s: rank %d's value: %s" % (self._who(op), root, layout))
        return tuple(layout[0]), np.dtype(layout[1])

    def _from_root(self, mine, root, op="broadcast", refused=None):
        """The root's array `mine` (shape and dtype too) on every rank. Elsewhere it lands in
        `mine` where that has them (in place), else in a new array (always, for None)."""
        shape, dtype = self._root_layout(root, op, value=mine, refused=refused)
        fits = mine is not None and mine.shape == shape and mine.dtype == dtype
        return self._comm.broadcast(mine if fits else np.empty(shape, dtype), root)

    def _all_layouts(self, op):
        """Every rank's shape, and whether every rank's dtype is rank 0's. A value of over 8
        dimensions, whose shape cannot travel, is an error on every rank."""
        comm, v = self._comm, self._value
        mine = np.zeros(10, np.int64)
        if v.ndim > 8:
            mine[0] = -v.ndim
        else:
            mine[0], mine[1:1 + v.ndim] = v.ndim, v.shape
        mine[9] = dtype_code(v.dtype)
        every = comm.all_gather(mine)
        deep = np.flatnonzero(every[:, 0] < 0)
        if deep.size:
            raise error(_synk.InvalidArgument, "%s: rank %d's value has %d dimensions (at most 8)"
                        % (self._who(op), deep[0], -every[deep[0], 0]))
        shapes = [tuple(int(d) for d in row[1:1 + row[0]]) for row in every]
        return shapes, bool((every[:, 9] == every[0, 9]).all())

    def _same_layout(self, op):
        """InvalidUsage on every rank unless every rank's value has rank 0's shape and dtype."""
        shapes, same_dtype = self._all_layouts(op)
        if not same_dtype:
            raise error(_synk.InvalidUsage, "%s: the ranks' values differ in dtype (this rank's: "
                        "%s)" % (self._who(op), self._value.dtype))
        if any(s != shapes[0] for s in shapes):
            raise error(_synk.InvalidUsage, "%s: the ranks' values differ in shape: %s"
                        % (self._who(op), shapes))

    def _joined(self, nd_up):
        """This rank's value as rows for a gatherv, and the shape of the values joined."""
        shapes, same_dtype = self._all_layouts("gather")
        who = self._who("gather")
        if not same_dtype:
            raise error(_synk.InvalidUsage, "%s: the ranks' values differ in dtype" % who)
        if nd_up == 1:
            if any(s != shapes[0] for s in shapes):
                raise error(_synk.InvalidUsage, "%s: gather(nd_up=1) stacks values of one shape, "
                                                "but the ranks' shapes differ: %s" % (who, shapes))
            return self._value.reshape(1, -1), (len(shapes),) + shapes[0]
        if nd_up != 0:
            raise error(_synk.InvalidArgument, "%s: nd_up must be 0 or 1" % who)
        if any(len(s) == 0 or s[1:] != shapes[0][1:] for s in shapes):
            raise error(_synk.InvalidUsage, "%s: gather(nd_up=0) joins rows of one shape, but "
                                            "the ranks' rows differ: %s" % (who, shapes))
        return self._value, (sum(s[0] for s in shapes),) + shapes[0][1:]


def _result_for_a_worker(shared, op, root):
    """After distribute(), why a result at another rank than the master would reach nobody."""
    if root != 0:
        return ("%s to root %r: after distribute() the result goes to the master (root 0); the "
                "other ranks only serve" % (shared._who(op), root))
    return None
