"""synk.Function: a batch of Data rows split over the ranks and their slices, each output
collected by its mode, checked against the same computed with NumPy."""
import sys

import numpy as np
import pytest

import synk
from conftest import selection

N = 10
VALUE = (np.arange(N * 3).reshape(N, 3) % 7 + 1).astype(np.float64)  # exact sums and products


def outputs(rows, w):
    """The body's output for each collect mode, from a slice's rows and a broadcast input."""
    s = rows.sum(axis=0)
    return {
        "avg": s * w,
        "sum": s,
        "prod": 1 + s % 3,
        "min": rows.min(axis=0, initial=np.inf),
        "max": rows.max(axis=0, initial=-np.inf),
        "gather": rows * 2,
        "none": rows[:, 0] + 0.5,
        "weighted_avg": rows.mean(axis=0) if len(rows) else np.full(3, np.nan),
    }


def share(sel, rank, size):
    m = len(sel)
    return sel[m * rank // size:m * (rank + 1) // size]


def accumulated(mode, rows_of_rank, num_slices, w):
    """One rank's output of `mode` over its slices, before any collective, as it arrives at
    the rank's collective: weighted_avg summed (rows times value), avg the slices' mean."""
    n, acc = len(rows_of_rank), None
    parts = [rows_of_rank[n * k // num_slices:n * (k + 1) // num_slices]
             for k in range(num_slices)]
    parts = [p for p in parts if len(p)] or parts[:1]  # a slice of no rows adds nothing
    for p in parts:
        part = VALUE[p]
        v = np.asarray(outputs(part, w)[mode], np.float64)
        if mode == "weighted_avg":
            v = v * len(part) if len(part) else np.zeros_like(v)
        if acc is None:
            acc = v
        elif mode in ("gather", "none"):
            acc = np.concatenate([acc, v])
        elif mode == "prod":
            acc = acc * v
        elif mode == "min":
            acc = np.minimum(acc, v)
        elif mode == "max":
            acc = np.maximum(acc, v)
        else:
            acc = acc + v
    return acc / len(parts) if mode == "avg" else acc


def expected(mode, batch, num_slices, w, rank, size, collected):
    """What `rank` gets: the collected value (collected: the root, or to_all), else its own."""
    sel = selection(batch, N)
    each = [accumulated(mode, share(sel, r, size), num_slices, w) for r in range(size)]
    if mode == "none" or not collected:
        mine = each[rank]
        rows = len(share(sel, rank, size))
        return mine / rows if mode == "weighted_avg" and rows else mine
    if mode == "gather":
        return np.concatenate(each)
    fold = {"avg": np.mean, "sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max,
            "weighted_avg": np.sum}[mode]
    out = fold(each, axis=0)
    return out / len(sel) if mode == "weighted_avg" and len(sel) else out


def check(got, want, mode):
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    if mode in ("avg", "weighted_avg"):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)
    else:
        np.testing.assert_array_equal(got, want)


BATCHES = [None, 7, slice(1, None, 2), slice(None, None, -3), np.array([9, 0, 4, 4, 2, 7]), [3]]
MODES = list(synk.COLLECT_MODES)


def test_collect_modes_are_the_synkhronos_ones():
    assert sorted(synk.COLLECT_MODES) == sorted(["avg", "sum", "prod", "min", "max", "gather",
                                                 "none", "weighted_avg"])


@pytest.mark.parametrize("batch", BATCHES, ids=repr)
@pytest.mark.parametrize("num_slices", [1, 2, 3])
@pytest.mark.parametrize("mode", MODES)
def test_each_mode_against_numpy(comm, mode, num_slices, batch):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda rows, w: outputs(rows, w)[mode], collect=mode, comm=comm)
    w = 0.5
    for to_all in (False, True):
        for root in range(comm.size):
            got = f(x, w, batch=batch, num_slices=num_slices, to_all=to_all, root=root)
            want = expected(mode, batch, num_slices, w, comm.rank, comm.size,
                            to_all or comm.rank == root)
            check(got, want, mode)


@pytest.mark.parametrize("batch", [None, slice(2, 9), np.array([5, 1, 8])], ids=repr)
@pytest.mark.parametrize("num_slices", [1, 3])
def test_a_list_of_modes_returns_a_list(comm, num_slices, batch):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda rows, w: [outputs(rows, w)[m] for m in MODES], collect=MODES,
                      comm=comm)
    for root in range(comm.size):
        got = f(x, 2.0, batch=batch, num_slices=num_slices, root=root)
        assert isinstance(got, list) and len(got) == len(MODES)
        for mode, g in zip(MODES, got):
            check(g, expected(mode, batch, num_slices, 2.0, comm.rank, comm.size,
                              comm.rank == root), mode)
    one = synk.Function(lambda rows: [rows.sum()], collect=["sum"], comm=comm)(x, batch=batch)
    assert isinstance(one, list) and len(one) == 1


def test_scalar_outputs_come_back_as_scalars(comm):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda rows: rows.sum(), collect="sum", comm=comm)
    got = f(x, to_all=True)
    assert np.ndim(got) == 0 and got == VALUE.sum()
    g = synk.Function(lambda rows: len(rows), collect="avg", comm=comm)  # an int: as a float
    got = g(x, batch=6, to_all=True)
    assert np.ndim(got) == 0 and np.asarray(got).dtype == np.float64
    assert got == np.mean([len(share(np.arange(6), r, comm.size)) for r in range(comm.size)])


@pytest.mark.parametrize("rows", [7, 1, 2, 0])
@pytest.mark.parametrize("num_slices", [1, 2, 3])
def test_weighted_avg_is_the_exact_mean(comm, rows, num_slices):
    """However the rows split (unevenly, or none on some ranks and slices), the weighted
    average of per-row means is the mean over the batch."""
    value = np.arange(rows * 2, dtype=np.float64).reshape(rows, 2) ** 2
    x = synk.Data(value if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda r: r.mean(axis=0) if len(r) else np.full(2, np.nan),
                      collect="weighted_avg", comm=comm)
    want = value.mean(axis=0) if rows else np.zeros(2)
    np.testing.assert_allclose(f(x, num_slices=num_slices, to_all=True), want, rtol=1e-14)
    got = f(x, num_slices=num_slices)
    mine = value[share(np.arange(rows), comm.rank, comm.size)]
    if comm.rank == 0:
        np.testing.assert_allclose(got, want, rtol=1e-14)
    else:  # its own rows' mean; nothing where it had no rows
        np.testing.assert_allclose(got, mine.mean(axis=0) if len(mine) else np.zeros(2),
                                   rtol=1e-14)
    np.testing.assert_allclose(f.local(x, num_slices=num_slices), want, rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_weighted_avg_of_a_scalar_loss_with_ranks_left_without_rows(comm, dtype):
    """A loss as the batch's mean (a 0-d float32 from xb.mean()) on a batch smaller than the
    ranks: the ranks with no rows must send the dtype of those with rows (NumPy 1.x made the
    weighted 0-d float32 a float64, and every rank failed with "differs in dtype")."""
    value = np.arange(20, dtype=dtype).reshape(10, 2)
    x = synk.Data(value if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda xb: xb.mean(), collect="weighted_avg", comm=comm)
    for batch in (1, np.array([4])):
        want = value[batch if isinstance(batch, np.ndarray) else slice(0, batch)].mean()
        assert f(x, batch=batch, to_all=True) == pytest.approx(float(want), rel=1e-3)


@pytest.mark.parametrize("batch, num_slices", [(1, 1), (2, 1), (None, 4), (3, 2)])
def test_a_guard_for_no_rows_takes_the_dtype_of_the_ranks_with_rows(comm, batch, num_slices):
    """The examples' guard (0.0, a float64, where a rank or slice has no rows) beside float32
    means: the ranks or slices without rows add nothing, whatever the guard's dtype."""
    value = np.arange(1, 8, dtype=np.float32)
    x = synk.Data(value if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda rows: [rows.mean() if len(rows) else 0.0,
                                    rows.sum() if len(rows) else 0.0],
                      collect=["weighted_avg", "sum"], comm=comm)
    mean, total = f(x, batch=batch, num_slices=num_slices, to_all=True)
    rows = value[:batch]
    assert mean == pytest.approx(float(rows.mean()), rel=1e-6) and total == rows.sum()
    assert mean.dtype == np.float32 and total.dtype == np.float32
    # A rank without rows adds nothing to the others' maximum, product or rows, guard or not.
    g = synk.Function(lambda rows: [-rows.max() if len(rows) else 0.0,
                                    rows.prod() if len(rows) else 0, rows if len(rows) else [0.0]],
                      collect=["min", "prod", "gather"], comm=comm)
    low, product, gathered = g(x, batch=batch, num_slices=num_slices, to_all=True)
    assert low == -rows.max() and product == rows.prod()
    np.testing.assert_array_equal(gathered, rows)


def test_weighted_avg_of_float16_adds_in_float32(comm):
    x = synk.Data(np.full((40000, 1), 4.0, np.float16) if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda rows: rows.mean(), collect="weighted_avg", comm=comm)
    assert f(x, to_all=True) == 4.0  # 40000 x 4.0 overflowed float16's 65504
    assert f.local(x) == 4.0


def test_avg_keeps_the_dtype_of_a_scalar_output(comm):
    x = synk.Data(np.arange(1, 8, dtype=np.float32) if comm.rank == 0 else None, comm=comm)
    for mode in ("avg", "weighted_avg"):
        f = synk.Function(lambda rows: rows.mean(), collect=mode, comm=comm)
        assert f(x, to_all=True, num_slices=2).dtype == np.float32


@pytest.mark.parametrize("batch, rows", [(range(2, -1, -1), [2, 1, 0]), (range(0, -1), []),
                                         (range(1, 9, 3), [1, 4, 7]), (range(9, 0, -4), [9, 5, 1])])
def test_a_range_batch_is_its_rows(comm, batch, rows):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    g = synk.Function(lambda r: r, collect="gather", comm=comm)
    np.testing.assert_array_equal(g(x, batch=batch, to_all=True), VALUE[rows].reshape(-1, 3))
    with pytest.raises(synk.InvalidArgument, match=r"range\(3, -2, -1\) goes outside the rows, "
                                                   "0 to %d" % (N - 1)):
        g(x, batch=range(3, -2, -1))


def test_broadcast_inputs_are_passed_through(comm):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    seen = []
    table = {"scale": 3}

    def body(rows, scale, label, options, arr):
        seen.append((scale, label, options is table, arr is given))
        return rows.sum(axis=0) * scale * options["scale"] + arr

    given = np.array([1.0, 2.0, 3.0])
    f = synk.Function(body, collect="sum", comm=comm)
    got = f(x, 2, "lbl", table, given, num_slices=2, to_all=True)
    assert seen == [(2, "lbl", True, True)] * 2
    np.testing.assert_array_equal(got, VALUE.sum(axis=0) * 6 + 2 * comm.size * given)
    # No Data at all: each rank runs its slices once, over no rows.
    h = synk.Function(lambda a: a * 2, collect="sum", comm=comm)
    np.testing.assert_array_equal(h(given, to_all=True), given * 2 * comm.size)


@pytest.mark.parametrize("batch", BATCHES, ids=repr)
@pytest.mark.parametrize("num_slices", [1, 3])
def test_local_runs_the_whole_batch_here(comm, num_slices, batch):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda rows, w: [outputs(rows, w)[m] for m in MODES], collect=MODES,
                      comm=comm)
    got = f.local(x, 1.5, batch=batch, num_slices=num_slices)
    for mode, g in zip(MODES, got):
        check(g, expected(mode, batch, num_slices, 1.5, 0, 1, True), mode)


def test_two_data_inputs_and_a_3d_output(comm):
    y_value = -VALUE[:, :2]
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    y = synk.Data(y_value if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda a, b: (a[:, :2] * b)[:, None, :], collect="gather", comm=comm)
    got = f(x, y, batch=np.array([9, 3, 3, 0]), num_slices=2, to_all=True)
    np.testing.assert_array_equal(got, (VALUE[:, :2] * y_value)[[9, 3, 3, 0]][:, None, :])


# ---- errors ----

class BodyFailed(Exception):
    pass


@pytest.mark.parametrize("num_slices", [1, 2])
def test_a_body_failing_on_one_rank(comm, num_slices):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    for bad in range(comm.size):
        def body(rows):
            if comm.rank == bad:
                raise BodyFailed("row %d is bad" % bad)
            return rows.sum()

        f = synk.Function(body, collect="sum", comm=comm, name="step")
        if comm.rank == bad:
            with pytest.raises(BodyFailed, match="row %d is bad" % bad):
                f(x, num_slices=num_slices)
        else:
            with pytest.raises(synk.Remote, match="Function 'step': rank %d failed: BodyFailed: "
                                                  "row %d is bad" % (bad, bad)):
                f(x, num_slices=num_slices)
        # Still in step: the communicator and the Function both work.
        assert comm.all_reduce(np.ones(2), op="sum")[0] == comm.size
        ok = synk.Function(lambda rows: rows.sum(), collect="sum", comm=comm)
        assert ok(x, to_all=True) == VALUE.sum()


def test_a_system_exit_in_a_body_on_one_rank_is_shared(comm):
    """SystemExit and KeyboardInterrupt are not Exceptions: the other ranks were not told, and
    met the failing rank's next call as "mismatched calls"."""
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    bad = comm.size - 1

    def body(rows):
        if comm.rank == bad:
            raise SystemExit(3)
        return rows.sum()

    f = synk.Function(body, collect="sum", comm=comm, name="quits")
    if comm.rank == bad:
        with pytest.raises(SystemExit):
            f(x)
    else:
        with pytest.raises(synk.Remote, match="'quits': rank %d failed: SystemExit: 3" % bad):
            f(x)
    assert comm.all_reduce(np.ones(2), op="sum")[0] == comm.size  # still in step


def test_bodies_failing_on_every_rank_raise_their_own(comm):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)

    def body(rows):
        raise (KeyError if comm.rank % 2 else ZeroDivisionError)("rank %d" % comm.rank)

    f = synk.Function(body, comm=comm)
    with pytest.raises(KeyError if comm.rank % 2 else ZeroDivisionError,
                       match="rank %d" % comm.rank):
        f(x)
    comm.barrier()


@pytest.mark.parametrize("collect, body, text", [
    (["sum", "max"], lambda r: (r.sum(), r.max(), r.min()), "returned 3 outputs, 2 declared"),
    (["sum", "max", "min"], lambda r: (r.sum(), r.max()), "returned 2 outputs, 3 declared"),
    ([], lambda r: (r.sum(),), "returned 1 outputs, 0 declared"),
])
def test_wrong_number_of_outputs(comm, collect, body, text):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(body, collect=collect, comm=comm)
    with pytest.raises(synk.InvalidUsage, match=text):
        f(x)
    with pytest.raises(synk.InvalidUsage, match=text):
        f.local(x)
    comm.barrier()


@pytest.mark.parametrize("collect, body, text", [
    (["sum", "max"], lambda r: r.sum(), "returned a float64; with a list of 2 collect modes"),
    ("sum", lambda r: None, "output 0 is NoneType of dtype object, not numbers"),
    (["sum", "gather"], lambda r: (r.sum(), "text"), "output 1 is str of dtype <U4"),
])
def test_outputs_that_are_not_numbers(comm, collect, body, text):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(body, collect=collect, comm=comm)
    with pytest.raises(synk.InvalidUsage, match=text):
        f(x)
    comm.barrier()


def test_a_bool_output_counts(comm):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda r: r[:, 0] > 3, collect="gather", comm=comm)
    got = f(x, to_all=True)
    np.testing.assert_array_equal(got, (VALUE[:, 0] > 3).astype(np.int64))


@pytest.mark.parametrize("collect", ["sum", "gather"])
def test_outputs_in_a_foreign_byte_order_are_the_same_numbers(comm, collect):
    foreign = (">" if sys.byteorder == "little" else "<") + "f8"
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda r: r.astype(foreign).sum(axis=0) if collect == "sum" else
                      r.astype(foreign), collect=collect, comm=comm)
    got = f(x, to_all=True)
    assert got.dtype.isnative
    np.testing.assert_array_equal(got, VALUE.sum(axis=0) if collect == "sum" else VALUE)


def test_no_outputs(comm):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    counted = []
    f = synk.Function(lambda r: counted.append(len(r)), collect=[], comm=comm)
    assert f(x, num_slices=2) == []
    assert sum(counted) == len(share(np.arange(N), comm.rank, comm.size))


@pytest.mark.parametrize("mode", ["avg", "sum", "prod", "min", "max", "weighted_avg"])
def test_outputs_whose_size_differs_across_ranks(comm, mode):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda r: np.ones(comm.rank + 1), collect=mode, comm=comm, name="odd")
    with pytest.raises(synk.InvalidUsage, match="Function 'odd': output 0 has from 1 to %d "
                                                "elements across the ranks" % comm.size):
        f(x, to_all=True)
    comm.barrier()


def test_rows_whose_size_differs_across_ranks_for_gather(comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda r: [np.ones((2, comm.rank + 1)), np.ones(comm.rank + 1)],
                      collect=["gather", "none"], comm=comm)
    g = synk.Function(lambda r: np.ones(2, np.float32 if comm.rank else np.float64),
                      collect="sum", comm=comm)
    with pytest.raises(synk.InvalidUsage, match="output 0 has from 1 to %d elements per row"
                                                % comm.size):
        f(x)
    with pytest.raises(synk.InvalidUsage, match="output 0 differs in dtype across the ranks"):
        g(x)
    # "none" collects nothing: its outputs may differ from rank to rank.
    h = synk.Function(lambda r: np.ones(comm.rank + 1), collect="none", comm=comm)
    np.testing.assert_array_equal(h(x, to_all=True), np.ones(comm.rank + 1))


def test_output_changing_shape_between_slices(comm):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda r: r.sum(axis=0)[:len(r) % 2 + 1], collect="sum", comm=comm)
    with pytest.raises(synk.InvalidUsage, match="changed shape between slices"):
        f(x, batch=[0, 1, 2] * comm.size, num_slices=2)  # slices of 1 and 2 rows
    comm.barrier()


@pytest.mark.parametrize("collect", ["mean", ["sum", "median"], "gathered"])
def test_unknown_collect_mode(comm, collect):
    with pytest.raises(synk.InvalidArgument, match="collect mode '(mean|median|gathered)' is "
                                                   "not one of avg, sum"):
        synk.Function(np.sum, collect=collect, comm=comm)


@pytest.mark.parametrize("num_slices", [0, -1, 1.5])
def test_num_slices_below_1(comm, num_slices):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda r: r.sum(), collect="sum", comm=comm, name="s")
    with pytest.raises(synk.InvalidArgument, match="Function 's': num_slices %r" % num_slices):
        f(x, num_slices=num_slices)
    with pytest.raises(synk.InvalidArgument, match="num_slices"):
        f.local(x, num_slices=num_slices)
    assert f(x, to_all=True) == VALUE.sum()


def test_bad_batches_roots_and_inputs(comm):
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    y = synk.Data(np.ones(N + 1) if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda *rows: 1.0, collect="sum", comm=comm, name="g")
    with pytest.raises(synk.InvalidArgument, match="index %d .*out of range for %d rows" % (N, N)):
        f(x, batch=[1, N])
    with pytest.raises(synk.InvalidArgument, match="batch %d" % (N + 1)):
        f(x, batch=N + 1)
    with pytest.raises(synk.InvalidArgument, match="Function 'g': rank %d is out of range"
                                                   % comm.size):
        f(x, root=comm.size)
    with pytest.raises(synk.InvalidArgument, match="different row counts"):
        f(x, y)
    with pytest.raises(synk.InvalidArgument, match="index %d .*out of range" % 2**63):
        f(x, batch=np.array([2**63], np.uint64))
    with pytest.raises(synk.InvalidArgument, match="Function 'g': batch 2 picks rows of the "
                                                   "synk.Data arguments, and none was given"):
        f(VALUE, batch=2)
    assert f(x, to_all=True) == comm.size


def test_ranks_in_different_calls(comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    x = synk.Data(VALUE if comm.rank == 0 else None, comm=comm)
    f = synk.Function(lambda r: r.sum(axis=0), collect="sum", comm=comm, name="f")
    h = synk.Function(lambda r: r.max(axis=0), collect="max", comm=comm, name="h")
    with pytest.raises(synk.InvalidUsage, match="the ranks called different Functions "
                                                "\\(Function 'f' and Function 'h'\\)"):
        (f if comm.rank == 0 else h)(x)
    with pytest.raises(synk.InvalidUsage, match="different batch sizes \\(rows\\), from 4 to 6"):
        f(x, batch=4 if comm.rank == 0 else 6)
    with pytest.raises(synk.InvalidUsage, match="different roots, from 0 to 1"):
        f(x, root=min(comm.rank, 1))
    with pytest.raises(synk.InvalidUsage, match="different to_all, from 0 to 1"):
        f(x, to_all=comm.rank == 0)
    np.testing.assert_array_equal(f(x, to_all=True), VALUE.sum(axis=0))
