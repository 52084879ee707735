"""The non-blocking calls (comm.iall_reduce, ...): a synk.Request whose wait() returns what the
blocking call returns; the arrays stay alive and synk's until the call ends."""
import gc

import numpy as np
import pytest

import synk
from conftest import rank_values


def test_iall_reduce_returns_the_array_on_wait(comm):
    a = rank_values(comm.rank, 4097, np.float32)
    req = comm.iall_reduce(a, op="sum")
    assert isinstance(req, synk.Request)
    result = req.wait()
    assert result is a
    expected = sum(rank_values(r, 4097, np.float64) for r in range(comm.size))
    np.testing.assert_array_equal(a, expected.astype(np.float32))
    assert req.test()  # ended


def test_every_call_has_a_started_form(comm):
    n = comm.size
    reqs = [
        comm.ibroadcast(np.full(5, comm.rank, dtype=np.int32), root=n - 1),
        comm.iall_gather(np.full(3, comm.rank, dtype=np.int64)),
        comm.ireduce(np.ones(2), root=0),
        comm.igather(np.full(2, comm.rank, dtype=np.uint8), root=0),
        comm.iscatter(np.arange(n * 2, dtype=np.float64).reshape(n, 2), root=0),
        comm.ireduce_scatter(np.ones((n, 3), dtype=np.float32), op="sum"),
    ]
    got = [r.wait() for r in reqs]  # in issue order, as every rank issued them
    np.testing.assert_array_equal(got[0], np.full(5, n - 1))
    np.testing.assert_array_equal(got[1], np.repeat(np.arange(n), 3).reshape(n, 3))
    if comm.rank == 0:
        np.testing.assert_array_equal(got[2], np.full(2, float(n)))
        np.testing.assert_array_equal(got[3], np.repeat(np.arange(n), 2).reshape(n, 2))
    else:
        assert got[2] is None and got[3] is None
    np.testing.assert_array_equal(got[4], [2.0 * comm.rank, 2.0 * comm.rank + 1])
    np.testing.assert_array_equal(got[5], np.full((1, 3), float(n)))


def test_arrays_outlive_a_dropped_request(comm):
    """Neither the caller's array nor the request kept: the call still ends, on every rank,
    in memory that was not freed under it."""
    comm.iall_reduce(np.ones(1 << 16, dtype=np.float32))
    gc.collect()
    b = np.ones(8)
    np.testing.assert_array_equal(comm.all_reduce(b), np.full(8, float(comm.size)))


def test_a_read_only_array_fails_at_wait(comm):
    """The rank takes part (into a new array), so that a read-only array on some ranks only
    leaves no rank waiting; its wait raises."""
    ro = np.ones(3)
    ro.setflags(write=False)
    req = comm.iall_reduce(ro)
    with pytest.raises(synk.InvalidArgument, match="read-only"):
        req.wait()
    comm.barrier()
