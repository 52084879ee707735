"""synk.Function, after Synkhronos's replicated functions: a Python callable made on every rank.
A call splits a batch of synk.Data rows across the ranks, runs each rank's share in num_slices
pieces, accumulates each output by its collect mode and collects it once, to the root (or to
every rank)."""
import numpy as np

from . import _synk
from . import _batch
from ._agree import bcast_object, check_root, describe, dtype_code, dtype_of_code, error
from ._model import driven, registry

# avg: the mean over slices, then over ranks. weighted_avg: each slice's value weighed by its
# rows, so that a body returning a per-row mean gives the exact mean over the batch however it
# splits. gather: slices and ranks joined along axis 0. none: this rank's slices joined.
COLLECT_MODES = ("avg", "sum", "prod", "min", "max", "gather", "none", "weighted_avg")
_REDUCE_OP = {"avg": "avg", "sum": "sum", "prod": "prod", "min": "min", "max": "max",
              "weighted_avg": "sum"}
_JOINED = ("gather", "none")


class Function:
    """Function(fn, collect="avg", *, comm=None, name=None)

    fn(*args) gets, for each synk.Data argument, its rows of the slice (a NumPy array), and
    every other argument as given (after distribute(), as the master gave it). It returns one
    output per collect mode: `collect` a mode returns one output, a list of modes a list.
    Made on every rank, in the same order, before distribute().
    """

    def __init__(self, fn, collect="avg", *, comm=None, name=None):
        reg = registry(comm)
        if reg.drives():
            raise error(_synk.InvalidUsage, "Function: make Functions on every rank before "
                                            "distribute() (the workers cannot be sent one)")
        self._single = isinstance(collect, str)
        self._collect = [collect] if self._single else list(collect)
        for mode in self._collect:
            if mode not in COLLECT_MODES:
                raise error(_synk.InvalidArgument, "Function: collect mode %r is not one of %s"
                            % (mode, ", ".join(COLLECT_MODES)))
        self._fn = fn
        self._registry = reg
        self._id = reg.add(self)
        self.name = name if name is not None else getattr(fn, "__name__", "function_%d" % self._id)

    def _describe(self):
        return "'%s' %s" % (self.name, ",".join(self._collect))

    @driven(refuse=lambda self, a: not a["to_all"] and a["root"] != 0 and
            "Function '%s': root %r: after distribute() the outputs are collected at the master "
            "(root 0) or everywhere (to_all)" % (self.name, a["root"]))
    def __call__(self, *args, batch=None, num_slices=1, to_all=False, root=0):
        """Every rank runs its share of the batch (of the Data arguments' rows). Returns the
        collected outputs at the root (on every rank with to_all); another rank gets its own
        accumulated outputs. A body that raises on any rank raises on every rank: its own
        exception where it raised, synk.Remote naming that rank elsewhere."""
        comm = self._registry.comm
        root = check_root(comm, "Function '%s'" % self.name, root)
        acc, failure, batch_rows, my_rows = None, None, 0, 0
        try:
            self._refuse_batch_without_data(args, batch)
            selection = _batch.select(batch, self._rows(args))
            mine = _batch.share(selection, comm.rank, comm.size)
            batch_rows, my_rows = len(selection), len(mine)
            acc = self._run_slices(args, mine, num_slices)
        except BaseException as e:  # noqa: BLE001 - every rank hears of it in _agree, even of a
            failure = e  # KeyboardInterrupt or SystemExit, which would leave them out of step
        acc = self._agree(failure, acc, (self._id, batch_rows, root, bool(to_all)), my_rows == 0)
        collected = [self._collect_one(j, v, to_all, root) for j, v in enumerate(acc)]
        here = to_all or comm.rank == root
        return self._result(self._divide_weighted(collected, batch_rows if here else my_rows))

    def local(self, *args, batch=None, num_slices=1):
        """This rank alone, over the whole batch; no collective."""
        self._refuse_batch_without_data(args, batch)
        selection = _batch.select(batch, self._rows(args))
        acc = self._run_slices(args, selection, num_slices)
        return self._result(self._divide_weighted(acc, len(selection)))

    # ---- running the slices ----

    def _refuse_batch_without_data(self, args, batch):
        # Synkhronos split every input; here a NumPy array reaches each rank whole.
        if batch is not None and not any(_is_data(a) for a in args):
            raise error(_synk.InvalidArgument,
                        "Function '%s': batch %r picks rows of the synk.Data arguments, and "
                        "none was given (a NumPy array reaches every rank whole: make it a "
                        "synk.Data to split it)" % (self.name, batch))

    def _rows(self, args):
        counts = {len(a) for a in args if _is_data(a)}
        if len(counts) > 1:
            raise error(_synk.InvalidArgument,
                        "Function '%s': Data inputs have different row counts" % self.name)
        return counts.pop() if counts else 0

    def _run_slices(self, args, selection, num_slices):
        if not isinstance(num_slices, (int, np.integer)) or num_slices < 1:
            raise error(_synk.InvalidArgument,
                        "Function '%s': num_slices %r (at least 1)" % (self.name, num_slices))
        n, acc = len(selection), None
        # A slice of no rows adds nothing: the body runs on none only where the rank has no
        # rows at all, once, for its outputs' shapes.
        parts = [selection[n * k // num_slices:n * (k + 1) // num_slices]
                 for k in range(num_slices)]
        parts = [part for part in parts if len(part)] or parts[:1]
        for part in parts:
            given = [_batch.rows_of(a.value, part) if _is_data(a) else a for a in args]
            outputs = self._outputs(self._fn(*given))
            outputs = [self._weigh(j, v, len(part)) for j, v in enumerate(outputs)]
            acc = outputs if acc is None else [self._accumulate(j, a, v)
                                               for j, (a, v) in enumerate(zip(acc, outputs))]
        return [_array(a / a.dtype.type(len(parts))) if mode == "avg" else a
                for mode, a in zip(self._collect, acc)]

    def _outputs(self, returned):
        if returned is None and not self._collect:
            return []
        if self._single:
            outputs = [returned]
        elif isinstance(returned, (list, tuple)):
            outputs = list(returned)
        else:
            raise error(_synk.InvalidUsage, "Function '%s': the body returned a %s; with a list "
                                            "of %d collect modes it returns a list or tuple"
                        % (self.name, type(returned).__name__, len(self._collect)))
        if len(outputs) != len(self._collect):
            raise error(_synk.InvalidUsage, "Function '%s': the body returned %d outputs, %d "
                                            "declared" % (self.name, len(outputs), len(self._collect)))
        arrays = []
        for j, (mode, v) in enumerate(zip(self._collect, outputs)):
            v = np.array(v, order="C", copy=True)
            if not v.dtype.isnative:  # the same numbers in this machine's byte order, for synk
                v = v.astype(v.dtype.newbyteorder("="))
            if v.dtype.kind == "b":
                v = v.astype(np.int64)  # a count of what was true
            if v.dtype.kind not in "iuf":
                raise error(_synk.InvalidUsage, "Function '%s': output %d is %s of dtype %s, not "
                                                "numbers" % (self.name, j, type(outputs[j]).__name__,
                                                             v.dtype))
            if mode in ("avg", "weighted_avg") and v.dtype.kind not in "f":
                v = v.astype(np.float64)
            arrays.append(np.atleast_1d(v) if mode in _JOINED else v)
        return arrays

    def _weigh(self, j, v, rows):
        # A slice of no rows adds nothing, even where its value is the NaN of an empty mean. The
        # weight is of the sum's dtype (NumPy 1.x turns a float32 0-d array times an int into
        # float64), which is float32 at least: float16's sum of weighted values overflows.
        if self._collect[j] != "weighted_avg":
            return v
        dtype = np.promote_types(v.dtype, np.float32)
        return _array(v.astype(dtype) * dtype.type(rows)) if rows else np.zeros(v.shape, dtype)

    def _accumulate(self, j, a, b):
        mode = self._collect[j]
        if mode in _JOINED:
            return np.concatenate([a, b])
        return _array(self._combine(j, mode, a, b))

    def _combine(self, j, mode, a, b):
        if a.shape != b.shape:
            raise error(_synk.InvalidUsage, "Function '%s': output %d changed shape between "
                                            "slices" % (self.name, j))
        if mode == "prod":
            return a * b
        if mode == "min":
            return np.minimum(a, b)
        if mode == "max":
            return np.maximum(a, b)
        return a + b

    # ---- collecting ----

    def _agree(self, failure, acc, call, no_rows):
        """Every rank learns whether a body failed anywhere, whether every rank made the same
        `call` (this Function, batch size, root and to_all), and whether each output to collect
        has one size and dtype on every rank (else each rank's collective would be another
        call), in one all_reduce (min) of [failing rank, each value and its negation]. A rank
        with `no_rows` takes the dtypes of those with rows: its body's outputs on no rows are
        placeholders (a guard's 0.0). Returns acc, so converted."""
        comm, m, unset = self._registry.comm, len(self._collect), np.iinfo(np.int64).max
        word = np.full(1 + 2 * len(call) + 4 * m, unset, np.int64)
        word[0] = comm.rank if failure is not None else comm.size
        word[1:1 + 2 * len(call)] = [x for value in call for x in (value, -value)]
        outputs = 1 + 2 * len(call)
        for j, v in enumerate(acc if failure is None else []):
            size = int(np.prod(v.shape[1:])) if self._collect[j] in _JOINED else v.size
            at = outputs + 4 * j
            word[at:at + 2] = size, -size
            if not no_rows:
                word[at + 2:at + 4] = dtype_code(v.dtype), -dtype_code(v.dtype)
        comm.all_reduce(word, op="min")
        if word[0] != comm.size:
            first = int(word[0])
            text = "" if failure is None else describe(failure)
            text = bcast_object(comm, text, first, "Function")  # names may differ by rank
            if failure is not None:
                failure._synk_agreed = True  # every rank knows: not a failure of this rank alone
                raise failure
            raise error(_synk.Remote, "Function '%s': rank %d failed: %s" % (self.name, first, text))
        self._check_same_call(word[1:outputs])
        return [self._agreed_output(j, v, word[outputs + 4 * j:outputs + 4 * j + 4], no_rows)
                for j, v in enumerate(acc)]

    def _check_same_call(self, pairs):
        """InvalidUsage on every rank where the ranks' calls differed: (min, -max) pairs of the
        Function's number, the batch's rows, the root and to_all."""
        lowest, highest = pairs[0::2], -pairs[1::2]
        if lowest[0] != highest[0]:
            raise error(_synk.InvalidUsage,
                        "Function '%s': the ranks called different Functions (%s and %s): every "
                        "rank calls the same Function, in the same order"
                        % (self.name, self._registry.label(int(lowest[0])),
                           self._registry.label(int(highest[0]))))
        for what, at in (("batch sizes (rows)", 1), ("roots", 2), ("to_all", 3)):
            if lowest[at] != highest[at]:
                raise error(_synk.InvalidUsage,
                            "Function '%s': the ranks gave different %s, from %d to %d: every "
                            "rank gives the same batch, root and to_all"
                            % (self.name, what, lowest[at], highest[at]))

    def _agreed_output(self, j, v, slots, no_rows):
        """Output j checked against the (min size, -max size, min dtype, -max dtype) of the
        ranks (a dtype unset where no rank has rows); a rank with no rows gives nothing in the
        ranks' dtype instead of its placeholder."""
        mode = self._collect[j]
        if mode == "none":
            return v
        if slots[0] != -slots[1]:
            raise error(_synk.InvalidUsage,
                        "Function '%s': output %d has from %d to %d elements%s across the "
                        "ranks; it must have the same on every rank"
                        % (self.name, j, slots[0], -slots[1],
                           " per row" if mode == "gather" else ""))
        if slots[2] == np.iinfo(np.int64).max:
            return v  # no rank has rows: each has its body's outputs on none
        if slots[2] != -slots[3]:
            raise error(_synk.InvalidUsage, "Function '%s': output %d differs in dtype across the "
                                            "ranks, from %s to %s"
                        % (self.name, j, dtype_of_code(slots[2]), dtype_of_code(-slots[3])))
        return _nothing(mode, v, dtype_of_code(slots[2])) if no_rows else v

    def _collect_one(self, j, v, to_all, root):
        comm, mode = self._registry.comm, self._collect[j]
        if mode == "none":
            return v
        if mode == "gather":
            if not to_all:
                out = comm.gatherv(v, root)
                return v if out is None else out
            rows = comm.all_gather(np.array([len(v)], np.int64))
            out = np.empty((int(rows.sum()),) + v.shape[1:], v.dtype)
            comm.gatherv(v, root, out=out if comm.rank == root else None)
            return comm.broadcast(out, root)
        if to_all:
            return comm.all_reduce(v, op=_REDUCE_OP[mode])
        comm.reduce(v, op=_REDUCE_OP[mode], root=root)
        return v

    def _divide_weighted(self, acc, rows):
        return [_array(a / a.dtype.type(rows)) if mode == "weighted_avg" and rows else a
                for mode, a in zip(self._collect, acc)]

    def _result(self, acc):
        acc = [a[()] if a.ndim == 0 else a for a in acc]
        return acc[0] if self._single else acc


def _nothing(mode, v, dtype):
    """What a rank with no rows adds to `mode`, shaped as its placeholder `v`: no rows to
    gather, the identity of a reduction; avg counts every rank, so v itself."""
    if mode == "gather":
        return v[:0].astype(dtype)
    if mode == "avg":
        return v.astype(dtype)
    limits = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    identity = {"sum": 0, "weighted_avg": 0, "prod": 1,
                "min": np.inf if dtype.kind == "f" else limits.max,
                "max": -np.inf if dtype.kind == "f" else limits.min}[mode]
    return np.full(v.shape, identity, dtype)


def _array(v):
    """NumPy's arithmetic on a 0-d array gives a scalar: an array again, for synk's calls."""
    a = np.asarray(v)
    return a if a.flags.writeable else a.copy()


def _is_data(a):
    from .data import Data
    return isinstance(a, Data)
