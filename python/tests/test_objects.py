"""broadcast_object, all_gather_object and all_gatherv: Horovod's broadcast_object and
allgather, mpi4py's bcast and allgather."""
import numpy as np
import pytest

import synk


class Unpicklable:
    def __reduce__(self):
        raise TypeError("this object refuses pickling")


def state_of(rank):
    """An object whose size differs by rank (so the padding and lengths matter)."""
    return {"rank": rank, "name": "r" * (rank * 7 + 1), "weights": np.arange(rank + 1.0)}


def test_broadcast_object_from_every_root(comm):
    for root in range(comm.size):
        mine = state_of(comm.rank)
        got = comm.broadcast_object(mine, root=root)
        if comm.rank == root:
            assert got is mine
        assert got["rank"] == root and got["name"] == "r" * (root * 7 + 1)
        np.testing.assert_array_equal(got["weights"], np.arange(root + 1.0))
    assert comm.broadcast_object(None if comm.rank else [1, (2, "three")]) == [1, (2, "three")]


def test_all_gather_object_in_rank_order(comm):
    mine = state_of(comm.rank)
    got = comm.all_gather_object(mine)
    assert len(got) == comm.size and got[comm.rank] is mine
    for r, obj in enumerate(got):
        assert obj["rank"] == r and obj["name"] == "r" * (r * 7 + 1)
        np.testing.assert_array_equal(obj["weights"], np.arange(r + 1.0))


def test_an_unpicklable_object_fails_on_every_rank(comm):
    obj = Unpicklable() if comm.rank == 0 else 1
    with pytest.raises(synk.InvalidArgument,
                       match="rank 0 could not send a Unpicklable: this object refuses pickling"):
        comm.broadcast_object(obj)
    last = comm.size - 1
    obj = Unpicklable() if comm.rank == last else 1
    with pytest.raises(synk.InvalidArgument, match="rank %d could not send a Unpicklable: this "
                                                   "object refuses pickling" % last):
        comm.all_gather_object(obj)
    assert comm.all_gather_object(comm.rank) == list(range(comm.size))  # still in step


@pytest.mark.parametrize("dtype", [np.int16, np.float32, np.float64])
def test_all_gatherv_concatenates_every_ranks_rows(comm, dtype):
    rows = [r % 3 for r in range(comm.size)]  # rank 0 has none
    mine = np.full((rows[comm.rank], 2, 3), comm.rank, dtype=dtype)
    got = comm.all_gatherv(mine)
    expected = np.concatenate([np.full((rows[r], 2, 3), r, dtype=dtype) for r in range(comm.size)])
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_all_gatherv_of_other_trailing_shapes_fails_on_every_rank(comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    a = np.ones((1, 2 if comm.rank == 0 else 3), np.float32)
    with pytest.raises(synk.InvalidArgument, match="gatherv: rank .* rows have"):
        comm.all_gatherv(a)
    comm.barrier()


def test_all_gatherv_gives_rank_0s_trailing_shape_everywhere(comm):
    """gatherv agrees on the elements of a row: (2, 3) rows on rank 0, (6,) rows elsewhere."""
    mine = np.full((1, 2, 3) if comm.rank == 0 else (1, 6), comm.rank, np.float32)
    got = comm.all_gatherv(mine)
    assert got.shape == (comm.size, 2, 3)
    np.testing.assert_array_equal(got[:, 0, 0], np.arange(comm.size))
