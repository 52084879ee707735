"""synk.Shared: each rank's own array, and collectives over the ranks' values."""
import sys

import numpy as np
import pytest

import synk
from conftest import rank_values


def own(rank, rows=None, dtype=np.float64):
    """Rank r's value: rows (default r + 1) of 3, all different from every other rank's."""
    rows = rank + 1 if rows is None else rows
    return (np.arange(rows * 3).reshape(rows, 3) + 100 * rank).astype(dtype)


def test_value_is_a_contiguous_copy(comm):
    given = np.arange(12.0).reshape(3, 4)[:, ::2]
    s = synk.Shared(given, comm=comm)
    assert s.value.flags.c_contiguous and not np.shares_memory(s.value, given)
    np.testing.assert_array_equal(s.value, given)
    assert s.shape == (3, 2) and s.dtype == np.float64
    s.value = [1, 2, 3]
    assert s.value.dtype.kind == "i" and s.shape == (3,)
    assert synk.Shared(np.ones(2), dtype=np.float32, comm=comm).dtype == np.float32
    empty = synk.Shared(comm=comm)
    assert empty.shape == (0,) and empty.dtype == np.float32


# ---- broadcast ----

@pytest.mark.parametrize("given", [False, True])
def test_broadcast_every_root(comm, given):
    for root in range(comm.size):
        dtype = np.float32 if comm.rank % 2 else np.int64  # rank 1 differs in dtype and shape
        s = synk.Shared(own(comm.rank, dtype=dtype), comm=comm)
        before = s.value
        if given:
            value = np.full((2, 2), 7 + comm.rank, np.int32)  # only the root's counts
            expected = np.full((2, 2), 7 + root, np.int32)
            s.broadcast(value, root=root)
        else:
            expected = own(root, dtype=np.float32 if root % 2 else np.int64)
            s.broadcast(root=root)
        assert s.shape == expected.shape and s.dtype == expected.dtype
        np.testing.assert_array_equal(s.value, expected)
        if not given and comm.rank == root:
            assert s.value is before  # the root's own array, untouched


def test_broadcast_in_place_where_the_layout_fits(comm):
    s = synk.Shared(np.full(5, comm.rank, np.float32), comm=comm)
    before = s.value
    s.broadcast(root=comm.size - 1)
    assert np.shares_memory(before, s.value)
    np.testing.assert_array_equal(before, np.full(5, comm.size - 1, np.float32))


# ---- reductions ----

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_all_reduce_default_is_the_average(comm, dtype):
    s = synk.Shared(rank_values(comm.rank, 10, dtype), comm=comm)
    s.all_reduce()
    expected = np.mean([rank_values(r, 10, np.float64) for r in range(comm.size)], axis=0)
    np.testing.assert_allclose(s.value, expected.astype(dtype), rtol=1e-6)
    assert s.dtype == dtype


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float64])
@pytest.mark.parametrize("op, fold", [("sum", np.sum), ("min", np.min), ("max", np.max),
                                      ("prod", np.prod)])
def test_all_reduce_ops(comm, dtype, op, fold):
    s = synk.Shared(rank_values(comm.rank, 7, dtype).reshape(7, 1), comm=comm)
    s.all_reduce(op=op)
    expected = fold([rank_values(r, 7, dtype) for r in range(comm.size)], axis=0).astype(dtype)
    np.testing.assert_array_equal(s.value, expected.reshape(7, 1))


@pytest.mark.parametrize("op, fold", [("sum", np.sum), ("max", np.max), ("avg", np.mean)])
def test_reduce_every_root(comm, op, fold):
    for root in range(comm.size):
        mine = rank_values(comm.rank, 6, np.float64)
        s = synk.Shared(mine, comm=comm)
        s.reduce(op=op, root=root)
        if comm.rank == root:
            expected = fold([rank_values(r, 6, np.float64) for r in range(comm.size)], axis=0)
            np.testing.assert_allclose(s.value, expected, rtol=1e-15)
        else:
            np.testing.assert_array_equal(s.value, mine)


@pytest.mark.parametrize("op, fold", [("sum", np.sum), ("min", np.min), ("avg", np.mean)])
def test_reduced_changes_no_value(comm, op, fold):
    for root in range(comm.size):
        mine = rank_values(comm.rank, 4, np.float64).reshape(2, 2)
        s = synk.Shared(mine, comm=comm)
        got = s.reduced(op=op, root=root)
        np.testing.assert_array_equal(s.value, mine)
        if comm.rank == root:
            expected = fold([rank_values(r, 4, np.float64) for r in range(comm.size)], axis=0)
            np.testing.assert_allclose(got, expected.reshape(2, 2), rtol=1e-15)
        else:
            assert got is None


# ---- gathers ----

@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_gather_nd_up_1_every_root(comm, dtype):
    s = synk.Shared(own(comm.rank, rows=2, dtype=dtype), comm=comm)
    expected = np.stack([own(r, rows=2, dtype=dtype) for r in range(comm.size)])
    for root in range(comm.size):
        got = s.gather(nd_up=1, root=root)
        if comm.rank == root:
            assert got.shape == (comm.size, 2, 3) and got.dtype == dtype
            np.testing.assert_array_equal(got, expected)
        else:
            assert got is None
    np.testing.assert_array_equal(s.gather(), expected if comm.rank == 0 else None)
    np.testing.assert_array_equal(s.all_gather(), expected)
    np.testing.assert_array_equal(s.all_gather(nd_up=1), expected)
    np.testing.assert_array_equal(s.value, own(comm.rank, rows=2, dtype=dtype))


def test_gather_of_0d_values(comm):
    s = synk.Shared(np.float64(comm.rank + 0.5), comm=comm)
    expected = np.arange(comm.size) + 0.5
    np.testing.assert_array_equal(s.all_gather(), expected)
    got = s.gather(root=comm.size - 1)
    if comm.rank == comm.size - 1:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("rows_of", [lambda r: r + 1, lambda r: r % 2, lambda r: 0],
                         ids=["r+1", "r%2", "none"])
def test_gather_nd_up_0_joins_rows(comm, rows_of):
    s = synk.Shared(own(comm.rank, rows=rows_of(comm.rank), dtype=np.int32), comm=comm)
    expected = np.concatenate([own(r, rows=rows_of(r), dtype=np.int32) for r in range(comm.size)])
    for root in range(comm.size):
        got = s.gather(nd_up=0, root=root)
        if comm.rank == root:
            assert got.shape == expected.shape and got.dtype == np.int32
            np.testing.assert_array_equal(got, expected)
        else:
            assert got is None
    got = s.all_gather(nd_up=0)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


# ---- scatter ----

@pytest.mark.parametrize("rows", [0, 1, 2, 3, 4, 7])
def test_scatter_every_root(comm, rows):
    for root in range(comm.size):
        full = own(root, rows=rows, dtype=np.float32)
        s = synk.Shared(full if comm.rank == root else np.ones(5, np.int8), comm=comm)
        s.scatter(root=root)
        lo, hi = rows * comm.rank // comm.size, rows * (comm.rank + 1) // comm.size
        assert s.shape == (hi - lo, 3) and s.dtype == np.float32
        np.testing.assert_array_equal(s.value, full[lo:hi])


def test_scatter_of_a_1d_value(comm):
    s = synk.Shared(np.arange(10) if comm.rank == 0 else None, comm=comm)
    s.scatter()
    np.testing.assert_array_equal(
        s.value, np.arange(10)[10 * comm.rank // comm.size:10 * (comm.rank + 1) // comm.size])


@pytest.mark.parametrize("batch", [None, 5, slice(1, None, 2), slice(None, None, -1),
                                   np.array([8, 0, 4, 4])], ids=repr)
def test_scatter_from_data(comm, batch):
    value = np.arange(18, dtype=np.int16).reshape(9, 2)
    x = synk.Data(value if comm.rank == 0 else None, comm=comm)
    s = synk.Shared(np.zeros(1), comm=comm)
    s.scatter(data=x, batch=batch)
    sel = np.arange(9)[batch] if not isinstance(batch, int) else np.arange(batch)
    if batch is None:
        sel = np.arange(9)
    m = len(sel)
    mine = sel[m * comm.rank // comm.size:m * (comm.rank + 1) // comm.size]
    assert s.dtype == np.int16 and s.value.flags.c_contiguous and s.value.flags.writeable
    np.testing.assert_array_equal(s.value, value[mine])
    assert not np.shares_memory(s.value, x.value)  # its own copy


# ---- one rank's value ----

def test_get_value_of_every_rank(comm):
    s = synk.Shared(own(comm.rank, dtype=np.float32 if comm.rank % 2 else np.int64), comm=comm)
    for rank in range(comm.size):
        got = s.get_value(rank)
        expected = own(rank, dtype=np.float32 if rank % 2 else np.int64)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
        assert not np.shares_memory(got, s.value)
    np.testing.assert_array_equal(s.value, own(comm.rank, dtype=s.dtype))


def test_set_value_changes_that_rank_only(comm):
    for rank in range(comm.size):
        mine = own(comm.rank, rows=2)
        s = synk.Shared(mine, comm=comm)
        new = -own(0, rows=2) - 1  # rank 0's value counts; the others give none
        s.set_value(rank, new if comm.rank == 0 else None)
        np.testing.assert_array_equal(s.value, new if comm.rank == rank else mine)
        np.testing.assert_array_equal(s.get_value(rank), new)


@pytest.mark.parametrize("new", [np.arange(5.0) + 10, np.array([[5, 6]], np.float32)],
                         ids=["other shape", "other dtype"])
def test_set_value_of_another_shape_or_dtype(comm, new):
    s = synk.Shared(np.zeros(2), comm=comm)
    target = comm.size - 1
    s.set_value(target, new if comm.rank == 0 else None)
    got = s.get_value(target)  # on every rank, so that every rank fails alike
    assert got.shape == new.shape and got.dtype == new.dtype, (got.shape, got.dtype)
    np.testing.assert_array_equal(got, new)


def test_get_shapes(comm):
    s = synk.Shared(np.zeros((comm.rank, 2, comm.rank + 1)), comm=comm)
    assert s.get_shapes() == [(r, 2, r + 1) for r in range(comm.size)]
    s.value = np.float32(1)
    assert s.get_shapes() == [()] * comm.size


# ---- errors, on every rank ----

@pytest.mark.parametrize("call", [
    lambda s, bad: s.broadcast(root=bad),
    lambda s, bad: s.broadcast(np.ones(2), root=bad),
    lambda s, bad: s.reduce(root=bad),
    lambda s, bad: s.reduced(root=bad),
    lambda s, bad: s.gather(root=bad),
    lambda s, bad: s.scatter(root=bad),
    lambda s, bad: s.get_value(bad),
    lambda s, bad: s.set_value(bad, np.ones(2)),
], ids=["broadcast", "broadcast value", "reduce", "reduced", "gather", "scatter", "get_value",
        "set_value"])
@pytest.mark.parametrize("bad", [-1, "size", 1.0])
def test_root_out_of_range(comm, call, bad):
    bad = comm.size if bad == "size" else bad
    s = synk.Shared(np.full(2, float(comm.rank)), comm=comm, name="w")
    text = ("the rank must be an int, not float" if isinstance(bad, float)
            else "rank %d is out of range for %d" % (bad, comm.size))
    with pytest.raises(synk.InvalidArgument, match="Shared 'w' .*" + text):
        call(s, bad)
    np.testing.assert_array_equal(s.value, np.full(2, float(comm.rank)))
    s.all_reduce(op="sum")  # still in step
    np.testing.assert_array_equal(s.value, np.full(2, comm.size * (comm.size - 1) / 2))


@pytest.mark.parametrize("gather", [lambda s: s.gather(nd_up=1), lambda s: s.all_gather(nd_up=1)],
                         ids=["gather", "all_gather"])
def test_gather_nd_up_1_of_differing_shapes(comm, gather):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    s = synk.Shared(np.zeros(2 + comm.rank), comm=comm, name="v")
    with pytest.raises(synk.InvalidUsage,
                       match=r"Shared 'v' gather: .*shapes differ: \[\(2,\), \(3,\)"):
        gather(s)
    comm.barrier()


def test_gathers_of_differing_dtypes_or_row_shapes(comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    s = synk.Shared(np.zeros(2, np.float32 if comm.rank else np.float64), comm=comm)
    for nd_up in (0, 1):
        with pytest.raises(synk.InvalidUsage, match="differ in dtype"):
            s.gather(nd_up=nd_up)
    s = synk.Shared(np.zeros((2, 1 + comm.rank)), comm=comm)
    with pytest.raises(synk.InvalidUsage, match="rows differ"):
        s.all_gather(nd_up=0)
    comm.barrier()


@pytest.mark.parametrize("nd_up", [2, -1])
def test_gather_nd_up_other_than_0_or_1(comm, nd_up):
    s = synk.Shared(np.zeros(3), comm=comm)
    with pytest.raises(synk.InvalidArgument, match="nd_up must be 0 or 1"):
        s.gather(nd_up=nd_up)
    with pytest.raises(synk.InvalidArgument, match="nd_up must be 0 or 1"):
        s.all_gather(nd_up=nd_up)
    comm.barrier()


def test_reduce_of_differing_shapes_fails_on_every_rank(comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    c = comm.split(0)  # its own communicator: a late report stays on it
    s = synk.Shared(np.zeros(c.rank + 1), comm=c)
    raised = []
    for root in range(c.size):
        for call in (lambda: s.reduce(op="sum", root=root), lambda: s.reduced(root=root)):
            try:
                call()
                raised.append(False)
            except synk.InvalidUsage:
                raised.append(True)
            try:
                c.barrier()  # where a rank that was not told hears of it
            except synk.InvalidUsage:
                pass
    assert all(raised), raised  # fails on every rank: each is a non-root for some root


def test_scatter_of_a_0d_value(comm):
    for root in range(comm.size):
        s = synk.Shared(np.float64(3) if comm.rank == root else np.ones(4), comm=comm, name="z")
        with pytest.raises(synk.InvalidArgument,
                           match="Shared 'z' scatter: rank %d's value: a 0-d value" % root):
            s.scatter(root=root)
        assert s.shape == (() if comm.rank == root else (4,))
    comm.barrier()


def test_scatter_of_a_value_synk_has_no_type_for(comm):
    s = synk.Shared(np.array([1j, 2j]), comm=comm)
    with pytest.raises(synk.InvalidArgument, match="dtype complex128"):
        s.scatter()
    with pytest.raises(synk.InvalidArgument, match="dtype complex128"):
        s.broadcast()
    comm.barrier()


def test_a_bool_value_broadcasts_and_reduces_as_logical(comm):
    s = synk.Shared(np.array([comm.rank == 0, False]), comm=comm)
    s.all_reduce(op="max")
    np.testing.assert_array_equal(s.value, [True, False])
    s.set_local(np.array([comm.rank == 0, True]))
    s.broadcast(root=0)
    assert s.dtype == np.bool_
    np.testing.assert_array_equal(s.value, [True, True])


def test_all_reduce_of_differing_shapes_fails_on_every_rank(comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    s = synk.Shared(np.zeros(comm.rank + 1), comm=comm, name="u")
    with pytest.raises(synk.InvalidUsage, match=r"Shared 'u' all_reduce: the ranks' values differ "
                                                r"in shape: \[\(1,\), \(2,\)"):
        s.all_reduce(op="sum")
    np.testing.assert_array_equal(s.value, np.zeros(comm.rank + 1))  # unchanged
    # Of one shape but not one dtype: the message says dtype, and this rank's.
    t = synk.Shared(np.zeros(2, np.float32 if comm.rank else np.float64), comm=comm, name="t")
    mine = "float32" if comm.rank else "float64"
    with pytest.raises(synk.InvalidUsage, match=r"Shared 't' all_reduce: the ranks' values differ "
                                                r"in dtype \(this rank's: %s\)" % mine):
        t.all_reduce(op="sum")


def test_a_value_of_over_8_dimensions_on_one_rank(comm):
    """Its shape cannot travel: an error on every rank, named, where it used to be raised on
    that rank alone (the others waiting in the all_gather)."""
    last = comm.size - 1
    s = synk.Shared(np.zeros((1,) * (9 if comm.rank == last else 1)), comm=comm, name="deep")
    for call in (lambda: s.get_shapes(), lambda: s.gather(), lambda: s.all_reduce()):
        with pytest.raises(synk.InvalidArgument, match="rank %d's value has 9 dimensions "
                                                       "\\(at most 8\\)" % last):
            call()
    comm.barrier()


def test_a_root_value_numpy_refuses_fails_on_every_rank(comm):
    s = synk.Shared(np.zeros(2), comm=comm, name="big")
    for call in (lambda v: s.broadcast(v), lambda v: s.set_value(0, v)):
        with pytest.raises(synk.InvalidArgument, match="Shared 'big' .*rank 0's value"):
            call(np.array([2 ** 70]) if comm.rank == 0 else None)  # an object array
        with pytest.raises(synk.InvalidArgument, match="Shared 'big' .*rank 0's value"):
            call([[1.0, 2.0], [3.0]] if comm.rank == 0 else None)  # ragged: NumPy refuses it
    np.testing.assert_array_equal(s.value, np.zeros(2))


FOREIGN_F4 = (">" if sys.byteorder == "little" else "<") + "f4"  # not this machine's order


def test_a_value_in_a_foreign_byte_order_is_refused(comm):
    """synk would read other numbers: refused wherever a value comes in, never summed wrong."""
    with pytest.raises(synk.InvalidArgument, match="Shared: value has dtype .f4, which is not "
                                                   "in this machine's byte order"):
        synk.Shared(np.array([1.5, 2.0], FOREIGN_F4), comm=comm)
    with pytest.raises(synk.InvalidArgument, match="dtype=.*byte order"):
        synk.Shared([1.5, 2.0], dtype=FOREIGN_F4, comm=comm)
    s = synk.Shared(np.array([1.5, 2.0], np.float32), comm=comm)
    with pytest.raises(synk.InvalidArgument, match="byte order"):
        s.value = np.array([1.5, 2.0], FOREIGN_F4)
    with pytest.raises(synk.InvalidArgument, match="rank 0's value: value has dtype .f4.*byte order"):
        s.broadcast(np.array([1.0, 2.0], FOREIGN_F4) if comm.rank == 0 else None)  # every rank
    with pytest.raises(synk.InvalidArgument, match="rank 0's value: value has dtype .f4.*byte order"):
        s.set_value(comm.size - 1, np.array([1.0, 2.0], FOREIGN_F4))
    s.all_reduce("sum")  # nothing refused changed the value
    np.testing.assert_array_equal(s.value, np.array([1.5, 2.0]) * comm.size)


def test_names_may_differ_by_rank_in_spmd(comm):
    """SPMD asks nothing of the names: a Shared named per rank still broadcasts (the check that
    ranks are in the same call must not take a name for a call)."""
    s = synk.Shared(np.arange(3.0) * (comm.rank + 1), comm=comm, name="g%d" % comm.rank)
    s.broadcast()
    np.testing.assert_array_equal(s.value, np.arange(3.0))
