"""Every collective of synk.Communicator on NumPy arrays against NumPy's own result."""
import numpy as np
import pytest

import synk
from conftest import DTYPES, rank_values

COUNTS = [0, 1, 7, 4097]
REDUCE = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}


def all_inputs(comm, count, dtype):
    return np.stack([rank_values(r, count, dtype) for r in range(comm.size)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
@pytest.mark.parametrize("count", COUNTS)
def test_all_reduce_in_place(comm, dtype, op, count):
    a = rank_values(comm.rank, count, dtype)
    address = a.__array_interface__["data"][0]
    result = comm.all_reduce(a, op=op)
    assert result is a  # in place: the caller's own array, the same memory
    assert a.__array_interface__["data"][0] == address
    expected = REDUCE[op](all_inputs(comm, count, dtype), axis=0).astype(dtype)
    np.testing.assert_array_equal(a, expected)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_all_reduce_avg_into_out(comm, dtype):
    a = rank_values(comm.rank, 100, dtype)
    out = np.empty_like(a)
    assert comm.all_reduce(a, op="avg", out=out) is out
    np.testing.assert_array_equal(a, rank_values(comm.rank, 100, dtype))  # input untouched
    expected = all_inputs(comm, 100, np.float64).mean(axis=0)
    np.testing.assert_allclose(out, expected, rtol=1e-3 if dtype == np.float16 else 1e-6)


def test_bfloat16_as_uint16(comm):
    # bfloat16 bits of 1.0 (0x3F80); summed over the ranks: size() exactly.
    a = np.full(8, 0x3F80, dtype=np.uint16)
    comm.all_reduce(a, dtype="bfloat16")
    as_float = (a.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(as_float, np.full(8, comm.size, dtype=np.float32))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", COUNTS)
def test_reduce_every_root(comm, dtype, count):
    for root in range(comm.size):
        a = rank_values(comm.rank, count, dtype)
        result = comm.reduce(a, op="sum", root=root)
        if comm.rank == root:
            assert result is a
            np.testing.assert_array_equal(a, all_inputs(comm, count, dtype).sum(axis=0).astype(dtype))
        else:
            assert result is None
            np.testing.assert_array_equal(a, rank_values(comm.rank, count, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", COUNTS)
def test_broadcast_every_root(comm, dtype, count):
    for root in range(comm.size):
        a = rank_values(comm.rank, count, dtype)
        assert comm.broadcast(a, root=root) is a
        np.testing.assert_array_equal(a, rank_values(root, count, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (3,), (2, 5)])
def test_all_gather_new_array(comm, dtype, shape):
    a = np.full(shape, comm.rank + 1, dtype=dtype)
    g = comm.all_gather(a)
    assert g.shape == (comm.size,) + shape and g.dtype == a.dtype
    for r in range(comm.size):
        np.testing.assert_array_equal(g[r], np.full(shape, r + 1, dtype=dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64])
def test_gather_every_root(comm, dtype):
    for root in range(comm.size):
        g = comm.gather(np.full(4, comm.rank, dtype=dtype), root=root)
        if comm.rank == root:
            np.testing.assert_array_equal(g, np.repeat(np.arange(comm.size), 4).reshape(comm.size, 4))
        else:
            assert g is None


@pytest.mark.parametrize("dtype", [np.uint8, np.int64, np.float16, np.float64])
def test_scatter_every_root(comm, dtype):
    for root in range(comm.size):
        send = np.arange(comm.size * 6, dtype=dtype).reshape(comm.size, 2, 3)
        if comm.rank != root:
            send = np.zeros_like(send)  # only its shape and dtype count off the root
        block = comm.scatter(send, root=root)
        np.testing.assert_array_equal(block, np.arange(6, dtype=dtype).reshape(2, 3) + comm.rank * 6)
        out = np.empty((2, 3), dtype=dtype)
        assert comm.scatter(send if comm.rank == root else None, root=root, out=out) is out
        np.testing.assert_array_equal(out, block)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_scatter(comm, dtype):
    a = np.stack([rank_values(comm.rank, 5, dtype)] * comm.size)  # size() blocks of 5
    block = comm.reduce_scatter(a, op="max")
    assert block.shape == (1, 5)
    np.testing.assert_array_equal(block[0], rank_values(comm.size - 1, 5, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [0, 1, 4097])
def test_all_to_all(comm, dtype, count):
    n = comm.size
    # Block q of rank r's a holds r * n + q + 0..count-1 (small enough for every dtype).
    a = np.stack([(comm.rank * n + q + np.arange(count)) % 100 for q in range(n)]).astype(dtype)
    got = comm.all_to_all(a)
    assert got.shape == a.shape and got.dtype == a.dtype
    expected = np.stack([(r * n + comm.rank + np.arange(count)) % 100 for r in range(n)])
    np.testing.assert_array_equal(got, expected.astype(dtype))
    out = np.empty_like(a)
    assert comm.iall_to_all(a, out=out).wait() is out
    np.testing.assert_array_equal(out, got)


@pytest.mark.parametrize("dtype", [np.int8, np.float32, np.float64])
def test_all_to_all_with_splits(comm, dtype):
    n, me = comm.size, comm.rank
    # Rank r sends rank q (r + q) % 3 rows of 2, each holding 10 r + q (Horovod's splits).
    splits = [(me + q) % 3 for q in range(n)]
    a = np.concatenate([np.full((s, 2), 10 * me + q) for q, s in enumerate(splits)])
    a = a.reshape(-1, 2).astype(dtype)
    expected = np.concatenate([np.full(((r + me) % 3, 2), 10 * r + me) for r in range(n)])
    expected = expected.reshape(-1, 2).astype(dtype)
    np.testing.assert_array_equal(comm.all_to_all(a, splits), expected)
    out = np.empty_like(expected)
    assert comm.iall_to_all(a, splits, out=out).wait() is out
    np.testing.assert_array_equal(out, expected)


def test_all_to_all_splits_wrong_on_one_rank_fail_every_rank(comm):
    a = np.zeros((comm.size + 2, 3), np.float32)
    splits = [1] * comm.size
    splits[0] = 3 if comm.rank != comm.size - 1 else 2  # there: size + 1 rows of size + 2
    error = synk.InvalidArgument if comm.rank == comm.size - 1 else synk.Remote
    with pytest.raises(error, match="splits add up to"):
        comm.all_to_all(a, splits)
    comm.barrier()


def test_all_to_all_refuses_in_place(comm):
    a = np.zeros((comm.size, 2))
    with pytest.raises(synk.InvalidUsage, match="all_to_all has no in place"):
        comm.all_to_all(a, out=a)
    comm.barrier()  # still usable on every rank: each refused its own call


def test_split(comm):
    half = comm.split(comm.rank % 2, key=-comm.rank)
    assert half.size == (comm.size + 1 - comm.rank % 2) // 2
    members = half.all_gather(np.array([comm.rank], dtype=np.int32))[:, 0]
    assert list(members) == sorted([r for r in range(comm.size) if r % 2 == comm.rank % 2],
                                   reverse=True)
    if comm.num_nodes == 1:  # (SYNK_SIMULATE_NODES makes more of one host)
        assert comm.local_rank == comm.rank and comm.node == 0
    assert comm.backend in ("shm", "mpi", "hier")


def test_out_of_an_equal_dtype_of_another_name(comm):
    """np.longlong is int64 on this platform, but not NumPy's int64 object: out is taken."""
    alias = np.dtype(np.longlong)
    if alias != np.dtype(np.int64) or alias is np.dtype(np.int64):
        pytest.skip("longlong is not a second int64 here")
    n = comm.size
    a = np.arange(2 * n, dtype=np.int64)
    mine = a[2 * comm.rank:2 * comm.rank + 2]  # this rank's block of a
    got = comm.all_gather(a, out=np.empty((n, 2 * n), alias))
    assert got.dtype == alias
    np.testing.assert_array_equal(got, np.tile(a, (n, 1)))
    got = comm.gather(a, out=np.empty((n, 2 * n), alias) if comm.rank == 0 else None)
    if comm.rank == 0:
        np.testing.assert_array_equal(got, np.tile(a, (n, 1)))
    np.testing.assert_array_equal(comm.reduce_scatter(a, out=np.empty(2, alias)), mine * n)
    np.testing.assert_array_equal(comm.scatter(a.reshape(n, 2), out=np.empty(2, alias)), mine)
    rows = a.reshape(-1, 1)[:comm.rank + 1]
    out = np.empty((n * (n + 1) // 2, 1), alias) if comm.rank == 0 else None
    got = comm.gatherv(rows, out=out)
    if comm.rank == 0:
        expected = np.concatenate([np.arange(r + 1) for r in range(n)])
        np.testing.assert_array_equal(got.ravel(), expected)
    got = comm.scatterv(a.reshape(-1, 1), [2] * n if comm.rank == 0 else None,
                        out=np.empty((2, 1), alias))
    np.testing.assert_array_equal(got.ravel(), mine)
    # A dtype that differs is still refused, and named as it is.
    with pytest.raises(synk.InvalidArgument, match="out has dtype int32 but the input has int64"):
        comm.all_gather(a, out=np.empty((n, 2 * n), np.int32))


# An out that does not fit on one rank: that rank takes part into a new array and raises once
# the call has ended (at wait() for a started call); the others get their results, in step.
BAD_OUT_CALLS = {
    "all_reduce": lambda c, a, out, i: getattr(c, i + "all_reduce")(a, "sum", out=out),
    "reduce": lambda c, a, out, i: getattr(c, i + "reduce")(a, "sum", c.size - 1, out=out),
    "all_gather": lambda c, a, out, i: getattr(c, i + "all_gather")(a, out=out),
    "reduce_scatter": lambda c, a, out, i: getattr(c, i + "reduce_scatter")(a, "sum", out=out),
    "scatter": lambda c, a, out, i: getattr(c, i + "scatter")(a, 0, out=out),
}


@pytest.mark.parametrize("name", sorted(BAD_OUT_CALLS))
@pytest.mark.parametrize("started", [False, True])
def test_a_bad_out_on_one_rank_raises_there_after_the_call(comm, name, started):
    call = BAD_OUT_CALLS[name]
    at_fault = comm.size - 1
    a = (np.arange(2.0 * comm.size) + comm.rank).reshape(comm.size, 2)
    expected = call(comm, a.copy(), None, "")  # the blocking call's result is the reference
    bad = np.empty(3 * comm.size + 1)  # no collective's result has this shape
    out = bad if comm.rank == at_fault else None

    def run():
        r = call(comm, a.copy(), out, "i" if started else "")
        return r.wait() if started else r

    if comm.rank == at_fault:
        with pytest.raises(synk.InvalidArgument, match="out"):
            run()
    else:
        got = run()
        if expected is None:
            assert got is None
        else:
            np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(comm.all_gather(np.array([comm.rank])).ravel(),
                                  np.arange(comm.size))


def test_bool_arrays_reduce_as_logical_or_and_and(comm):
    """NumPy's bool arrays (a mask, a 'done' flag): sum and max are the logical or over the
    ranks, prod and min the logical and, as NumPy adds and multiplies bools."""
    last = comm.size - 1
    for op, expect_any in (("sum", True), ("max", True), ("prod", False), ("min", False)):
        # Column 0: true on every rank; 1: on the last rank only; 2: on none.
        a = np.array([True, comm.rank == last, False])
        got = comm.all_reduce(a, op=op)
        assert got.dtype == np.bool_
        assert got.view(np.uint8).max() <= 1  # a sum of bytes would give 2s
        np.testing.assert_array_equal(
            got, [True, expect_any or comm.size == 1, False], err_msg=op)
        b = np.array([True, comm.rank == last, False])
        r = comm.reduce(b, op=op, root=last)
        if comm.rank == last:
            np.testing.assert_array_equal(r, [True, expect_any or comm.size == 1, False])
    with pytest.raises(synk.InvalidArgument, match="avg of a bool array"):
        comm.all_reduce(np.ones(2, np.bool_), op="avg")
    with pytest.raises(synk.InvalidArgument, match="out has dtype uint8 but the input has bool"):
        comm.all_reduce(np.ones(2, np.bool_), out=np.zeros(2, np.uint8))


def test_bool_arrays_move(comm):
    mine = np.array([comm.rank % 2 == 0, True, False])
    got = comm.all_gather(mine)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, [[r % 2 == 0, True, False] for r in range(comm.size)])
    flag = np.array([comm.rank == 0])
    assert comm.broadcast(flag, root=0)[0]
