"""gatherv and scatterv: rows of a shared trailing shape, as many as each rank has."""
import time

import numpy as np
import pytest

import synk


def rows_of(rank):
    return rank % 3  # 0, 1, 2, 0, ...: rank 0 sends or gets none


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.float16, np.float32, np.float64])
def test_gatherv_every_root(comm, dtype):
    mine = np.full((rows_of(comm.rank), 2), comm.rank, dtype=dtype)
    expected = np.concatenate([np.full((rows_of(r), 2), r, dtype=dtype) for r in range(comm.size)])
    for root in range(comm.size):
        got = comm.gatherv(mine, root=root)
        if comm.rank == root:
            assert got.shape == expected.shape and got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)
        else:
            assert got is None
        req = comm.igatherv(mine, root=root)
        got = req.wait()
        if comm.rank == root:
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float32, np.float64])
def test_scatterv_every_root(comm, dtype):
    counts = [rows_of(r) for r in range(comm.size)]
    for root in range(comm.size):
        if comm.rank == root:
            a = np.concatenate([np.full((counts[r], 3), r, dtype=dtype) for r in range(comm.size)])
            got = comm.scatterv(a, counts, root=root)
        else:
            got = comm.scatterv(np.empty((0, 3), dtype=dtype), root=root)  # dtype and row shape
        np.testing.assert_array_equal(got, np.full((counts[comm.rank], 3), comm.rank, dtype=dtype))
        got = (comm.iscatterv(a, counts, root=root) if comm.rank == root else
               comm.iscatterv(np.empty((0, 3), dtype=dtype), root=root)).wait()
        np.testing.assert_array_equal(got, np.full((counts[comm.rank], 3), comm.rank, dtype=dtype))


def test_mismatched_rows_fail_on_every_rank(comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    a = np.ones((1, 2 if comm.rank == 0 else 3))
    with pytest.raises(synk.InvalidArgument, match="gatherv: rank .* rows have"):
        comm.gatherv(a)
    with pytest.raises(synk.InvalidArgument, match="scatterv: rank .* rows of"):
        comm.scatterv(a, [1] + [0] * (comm.size - 1) if comm.rank == 0 else None)
    comm.barrier()


def test_mismatched_dtypes_fail_on_every_rank(comm):
    """Rank 0's float32 against the others' int32: before, on the mpi backend, the root read
    the int32 bits as floats (3e-45), silently."""
    if comm.size == 1:
        pytest.skip("needs two ranks")
    a = np.ones((2, 2), np.float32 if comm.rank == 0 else np.int32)
    with pytest.raises(synk.InvalidArgument, match="gatherv: rank .*'s a is .*, this rank's"):
        comm.gatherv(a)
    with pytest.raises(synk.InvalidArgument, match="scatterv: rank .*'s a is .*, this rank's"):
        comm.scatterv(a, [2] + [0] * (comm.size - 1) if comm.rank == 0 else None)
    comm.barrier()


def test_wrong_counts_fail_on_every_rank(comm):
    a = np.ones((4, 2))
    with pytest.raises(synk.InvalidArgument, match="the root's counts must give each"):
        comm.scatterv(a, [5] * comm.size if comm.rank == 0 else None)  # sums past 4 rows
    if comm.size == 3:  # counts whose sum wraps past 2^64 to the 4 rows: they passed before
        third = (2 ** 64 + 4) // 3
        wrapping = [third, third + 1, third + 1]
        assert sum(wrapping) == 2 ** 64 + 4 and max(wrapping) < 2 ** 63
        with pytest.raises(synk.InvalidArgument, match="the root's counts must give each"):
            comm.scatterv(a, wrapping if comm.rank == 0 else None)
    with pytest.raises(synk.InvalidArgument, match="the root's counts must give each"):
        comm.scatterv(a, None)  # the root gave none
    comm.barrier()


# ---- a bad argument on one rank: every rank raises, none waits ----

def raises_on_every_rank(comm, at_fault, call, text):
    """call() raises on every rank, at once: InvalidArgument matching `text` on rank `at_fault`,
    Remote naming it on the others. The ranks are still in step after it."""
    start = time.monotonic()
    if comm.rank == at_fault:
        with pytest.raises(synk.InvalidArgument, match=text):
            call()
    else:
        with pytest.raises(synk.Remote, match="rank %d rejected its arguments" % at_fault):
            call()
    assert time.monotonic() - start < 10  # not SYNK_TIMEOUT's wait
    np.testing.assert_array_equal(comm.all_gather(np.array([comm.rank])).ravel(),
                                  np.arange(comm.size))


ROOT_OUTS = [
    (lambda size: np.empty((size + 3, 2), np.float32), r"gather(v)?: out has shape \(\d+, 2\) but "
                                                       r"the result"),
    (lambda size: np.empty((size, 3), np.float32), r"out has shape \(\d+, 3\) but the result"),
    (lambda size: np.empty(2 * size, np.float32), r"out has shape \(\d+,\) but the result"),
    (lambda size: np.empty((size, 2), np.float64), "out has dtype float64 but the input has float32"),
    (lambda size: np.empty((size, 4), np.float32)[:, ::2], "out is not C-contiguous"),
]


@pytest.mark.parametrize("bad_out, text", ROOT_OUTS)
@pytest.mark.parametrize("started", [False, True])
def test_gatherv_with_a_bad_out_at_the_root(comm, bad_out, text, started):
    for root in range(comm.size):
        out = bad_out(comm.size) if comm.rank == root else None
        a = np.ones((1, 2), np.float32)
        gatherv = comm.igatherv if started else comm.gatherv
        raises_on_every_rank(comm, root, lambda: gatherv(a, root, out=out), text)


@pytest.mark.parametrize("bad_out, text", ROOT_OUTS)
def test_gather_with_a_bad_out_at_the_root(comm, bad_out, text):
    # The root takes part into a new array and raises once the call has ended; the others
    # return as usual, and the next gather pairs with the same one on every rank.
    for root in range(comm.size):
        out = bad_out(comm.size) if comm.rank == root else None
        a = np.full(2, comm.rank, np.float32)
        start = time.monotonic()
        if comm.rank == root:
            with pytest.raises(synk.InvalidArgument, match=text):
                comm.gather(a, root, out=out)
        else:
            assert comm.gather(a, root, out=out) is None
        assert time.monotonic() - start < 10
        got = comm.gather(a, root)
        if comm.rank == root:
            np.testing.assert_array_equal(got[:, 0], np.arange(comm.size))
        np.testing.assert_array_equal(comm.all_gather(np.array([comm.rank])).ravel(),
                                      np.arange(comm.size))


@pytest.mark.parametrize("bad_out, text", [
    (lambda rows: np.empty((rows + 3, 1)), r"scatterv: out has shape \(5, 1\) but the result has "
                                           r"shape \(2, 1\)"),
    (lambda rows: np.empty((rows, 2)), r"scatterv: out has shape \(2, 2\) but the result"),
    (lambda rows: np.empty((rows, 1), np.float32), "out has dtype float32 but the input has float64"),
    (lambda rows: np.empty((rows, 1)).astype(">f8"), "out has dtype >f8, which is not"),
])
@pytest.mark.parametrize("started", [False, True])
def test_scatterv_with_a_bad_out_on_one_rank(comm, bad_out, text, started):
    counts = [2] * comm.size
    at_fault = comm.size - 1  # not the root (but the root too, on 1 rank)
    if comm.rank == 0:
        a = np.arange(2.0 * comm.size).reshape(-1, 1)
    else:
        a = np.empty((0, 1))
    out = bad_out(2) if comm.rank == at_fault else None
    scatterv = comm.iscatterv if started else comm.scatterv
    raises_on_every_rank(comm, at_fault, lambda: scatterv(a, counts if comm.rank == 0 else None,
                                                          0, out=out), text)


@pytest.mark.parametrize("call", [
    lambda c, a: c.gatherv(a),
    lambda c, a: c.scatterv(a, [0] * c.size if c.rank == 0 else None),
])
def test_a_bad_a_on_one_rank(comm, call):
    at_fault = comm.size - 1
    a = np.ones((2, 4))
    if comm.rank == at_fault:
        a = a[:, ::2]
    raises_on_every_rank(comm, at_fault, lambda: call(comm, a), "a is not C-contiguous")
