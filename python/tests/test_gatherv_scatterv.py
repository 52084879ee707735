"""gatherv and scatterv: rows of a shared trailing shape, as many as each rank has."""
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


def test_wrong_counts_fail_on_every_rank(comm):
    a = np.ones((4, 2))
    with pytest.raises(synk.InvalidArgument, match="the root's counts must give each"):
        comm.scatterv(a, [5] * comm.size if comm.rank == 0 else None)  # sums past 4 rows
    with pytest.raises(synk.InvalidArgument, match="the root's counts must give each"):
        comm.scatterv(a, None)  # the root gave none
    comm.barrier()
