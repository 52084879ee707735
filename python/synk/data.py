"""synk.Data, after Synkhronos's data: an array held once per node in shared memory (axis 0:
the examples), which every rank of the node reads as a NumPy view, without a copy."""
import numpy as np

from . import _synk
from . import _batch
from ._agree import bcast_object, error
from ._model import driven, registry


class Data:
    """Data(value=None, *, shape=None, dtype=None, comm=None, oversize=1.0, name=None)

    Collective over comm (default: every rank). Rank 0 gives the value (every node gets it),
    or the shape and dtype of zeros; the other ranks may give nothing. oversize in [1, 2]
    reserves room for resize() to grow into without a new segment.
    """

    def __init__(self, value=None, *, shape=None, dtype=None, comm=None, oversize=1.0, name=None):
        reg = registry(comm)
        self._registry = reg
        if reg.drives():  # the workers take the shape and dtype from the master's broadcast
            reg.driver.drive(("new", Data, dict(oversize=oversize, name=name)),
                             lambda: self._make(value, shape, dtype, oversize, name))
            reg.driver.made_here(self)
        else:
            self._make(value, shape, dtype, oversize, name)

    def _make(self, value, shape, dtype, oversize, name):
        comm = self._registry.comm
        layout = None
        if comm.rank == 0:  # the others take its oversize too
            layout = _layout(value, shape, dtype)
            layout = layout if isinstance(layout, str) else layout + (oversize,)
        layout = bcast_object(comm, layout, 0, "Data()")
        if isinstance(layout, str):
            raise error(_synk.InvalidArgument, "Data: " + layout)
        shape, dtype, filled, oversize = layout
        self._dtype = np.dtype(dtype)
        self._store = _synk._DataStore(comm, list(shape), self._dtype.itemsize, oversize)
        self._id = self._registry.add(self)
        self.name = name if name is not None else "data_%d" % self._id
        if filled:
            self._set(value)

    def _describe(self):
        return "'%s'" % self.name

    # ---- reading ----

    @property
    def value(self):
        """Every row, as a read-only view of the node's segment."""
        return self._store.view(self._dtype)

    def __getitem__(self, index):
        return self.value[index]

    def __len__(self):
        return self._store.shape[0]

    def __array__(self, dtype=None, copy=None):
        # NumPy 2 passes copy=None (copy if needed) or False (never: a conversion is refused);
        # NumPy 1.x neither.
        if copy:
            return np.array(self.value, dtype=dtype, copy=True)
        if copy is False and dtype is not None and np.dtype(dtype) != self._dtype:
            raise ValueError("Data.__array__: copy=False, but %s to %s needs a copy"
                             % (self._dtype, np.dtype(dtype)))
        return np.asarray(self.value, dtype=dtype)

    @property
    def shape(self):
        return tuple(self._store.shape)

    @property
    def dtype(self):
        return self._dtype

    @property
    def segment_name(self):
        """The node segment's name ("memfd:synk-..." or "/synk-..."), for logs."""
        return self._store.segment_name

    def take(self, batch=None):
        """This rank's share of the batch's rows: a view where they are contiguous (a slice),
        else a copy (an index array)."""
        comm = self._registry.comm
        return _batch.rows_of(self.value, _batch.share(_batch.select(batch, len(self)),
                                                       comm.rank, comm.size))

    # ---- changes: collective (every rank SPMD; the master alone after distribute()) ----

    @driven("value")
    def set_value(self, value):
        """Rank 0's value (its rows may differ in number: the data resizes) on every node."""
        self._set(value)

    def _set(self, value):
        comm = self._registry.comm
        rows = None
        if comm.rank == 0:
            try:
                value = _converted(value, self._dtype)
                if value.ndim == 0:
                    rows = "a 0-d value"
                elif value.shape[1:] != self.shape[1:]:
                    rows = "rows of shape %s, the data's are %s" % (value.shape[1:], self.shape[1:])
                else:
                    value = np.ascontiguousarray(value)
                    rows = value.shape[0]
            except Exception as e:  # noqa: BLE001 - refused on every rank, below
                rows = "%s" % e
        rows = bcast_object(comm, rows, 0, "Data.set_value")
        if isinstance(rows, str):
            raise error(_synk.InvalidArgument, "Data '%s': set_value: rank 0 gave %s" % (self.name, rows))
        if rows != len(self):
            self._store.resize(rows, 1.0)
        self._store.set_value(value if comm.rank == 0 else None)

    @driven()
    def load(self, loader):
        """loader(array) fills the node's copy (a writable view of every row), once per node,
        on its local rank 0. After distribute() the workers get the loader by reference: a
        function defined at a module's top level."""
        if not callable(loader):
            raise error(_synk.InvalidArgument, "Data.load: the loader must be a function of the "
                                               "array, not a %s" % type(loader).__name__)
        self._store.load(loader, self._dtype)

    @driven()
    def resize(self, rows, oversize=1.0):
        """rows rows, the contents kept up to the smaller count. Views taken before keep the
        rows they had."""
        if not isinstance(rows, (int, np.integer)) or isinstance(rows, bool) or rows < 0:
            raise error(_synk.InvalidArgument, "Data.resize: rows %r (an int, 0 or more)" % (rows,))
        self._store.resize(int(rows), float(oversize))

    @driven()
    def free(self):
        """Gives the node's memory back (views taken before keep theirs); 0 rows remain."""
        self._store.free()


def _layout(value, shape, dtype):
    """Rank 0's (shape, dtype, whether it gave a value) for a Data, or why it has none."""
    try:
        if value is not None:
            value = np.asarray(value, dtype=dtype)
            shape, dtype = value.shape, value.dtype
        if shape is None:
            return "rank 0 gave neither a value nor a shape"
        shape = tuple(int(d) for d in np.atleast_1d(shape))
        dtype = np.dtype(np.float32 if dtype is None else dtype)
    except Exception as e:  # noqa: BLE001 - refused on every rank, below
        return "%s" % e
    if dtype.hasobject or dtype.itemsize == 0:
        return "dtype %s has no fixed size in memory" % dtype
    if not shape or min(shape) < 0:
        return "shape %s: needs a first axis (the rows), no negative dimension" % (shape,)
    return shape, dtype, value is not None  # the dtype itself, pickled: padding, offsets and all


def _converted(value, dtype):
    """value as an array of dtype. Numbers into an integer Data must keep their values: 1.0
    becomes 1, but 2.7, 300 into uint8 or -1 into unsigned are refused, not changed silently."""
    if dtype.kind not in "biu":
        return np.asarray(value, dtype=dtype)
    given = np.asarray(value)
    if given.dtype.kind not in "biuf" or given.dtype == dtype:
        return np.asarray(value, dtype=dtype)
    with np.errstate(invalid="ignore", over="ignore"):  # a NaN or an overflow: refused below
        converted = given.astype(dtype)
    if not np.array_equal(converted, given):
        raise TypeError("values of dtype %s that a Data of %s cannot hold unchanged (cast them "
                        "first)" % (given.dtype, dtype))
    return converted
