"""comm.grouped_all_reduce and comm.grouped_broadcast: lists of arrays, each in place, packed
per dtype into as few collectives as SYNK_FUSION_BYTES allows. Exact values on every rank."""
import numpy as np
import pytest

import synk
from conftest import DTYPES, rank_values


def test_a_list_of_every_dtype_is_reduced_in_place(comm):
    n = comm.size
    arrays = [rank_values(comm.rank, 5 + i, dt) for i, dt in enumerate(DTYPES)]
    arrays.append(np.zeros((0, 3), np.float32))  # empty entries are fine
    out = comm.grouped_all_reduce(arrays)
    assert len(out) == len(arrays)
    for i, (got, dt) in enumerate(zip(arrays, DTYPES)):
        assert out[i] is got  # the caller's own arrays
        want = sum(rank_values(r, 5 + i, np.float64) for r in range(n))
        np.testing.assert_array_equal(got, want.astype(dt))


@pytest.mark.parametrize("op", ["max", "prod", "avg"])
def test_ops_and_shapes(comm, op):
    n, r = comm.size, comm.rank
    a = np.full((2, 3), r + 1.0, np.float64)
    b = np.arange(4, dtype=np.float32) + r
    comm.grouped_all_reduce((a, b), op)
    values = np.arange(1, n + 1, dtype=np.float64)
    ref = {"max": values.max(), "prod": values.prod(), "avg": values.mean()}[op]
    np.testing.assert_array_equal(a, np.full((2, 3), ref))
    rows = np.arange(4)[:, None] + np.arange(n)[None, :]
    ref_b = {"max": rows.max(1), "prod": rows.prod(1), "avg": rows.mean(1)}[op]
    np.testing.assert_allclose(b, ref_b.astype(np.float32), rtol=1e-6)


def test_many_small_arrays_as_gradients(comm):
    # A model's many small gradients, of float32, in one list.
    grads = [np.full(17 + i % 5, comm.rank + i, np.float32) for i in range(300)]
    comm.grouped_all_reduce(grads, "avg")
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, np.mean([r + i for r in range(comm.size)]), rtol=1e-6)


def test_large_arrays_in_place_among_small_ones(comm):
    # 64 KiB or more runs alone, in place; the small ones around it are packed.
    n, r = comm.size, comm.rank
    big = np.full(40000, r + 1.0, np.float32)  # 160 KB
    small = [np.full(3, r * 10 + i, np.int64) for i in range(3)]
    comm.grouped_all_reduce([small[0], big, small[1], small[2]])
    np.testing.assert_array_equal(big, np.full(40000, n * (n + 1) / 2, np.float32))
    for i, s in enumerate(small):
        np.testing.assert_array_equal(s, np.full(3, 10 * n * (n - 1) // 2 + n * i))
    root = n - 1
    weights = np.full(50000, float(r), np.float64)
    if r == root:
        weights.flags.writeable = False
    comm.grouped_broadcast([np.zeros(2) + r, weights], root=root)
    np.testing.assert_array_equal(weights, np.full(50000, float(root)))


def test_broadcast_from_the_last_rank(comm):
    root = comm.size - 1
    x = [np.full(4, comm.rank, np.int32), np.full((2, 2), comm.rank * 10.0)]
    if comm.rank == root:
        x[1].flags.writeable = False  # the root's arrays are only read
    out = comm.grouped_broadcast(x, root=root)
    assert out[0] is x[0]
    np.testing.assert_array_equal(x[0], np.full(4, root, np.int32))
    np.testing.assert_array_equal(x[1], np.full((2, 2), root * 10.0))


def test_every_rank_refuses_avg_of_integers(comm):
    a = np.ones(3, np.float32)
    with pytest.raises(synk.InvalidArgument, match="grouped_all_reduce: entry 1 is an array of "
                                                   "int64: avg is an error on integer types"):
        comm.grouped_all_reduce([a, np.ones(2, np.int64)], "avg")
    np.testing.assert_array_equal(a, np.ones(3, np.float32))  # nothing changed


def test_an_array_refused_on_one_rank_fails_every_rank(comm):
    a = np.ones(3, np.float32)
    b = np.ones((3, 2))[:, 0] if comm.rank == 0 else np.ones(3)  # rank 0's: a strided view
    if comm.rank == 0:
        with pytest.raises(synk.InvalidArgument, match="grouped_all_reduce: entry 1 is not "
                                                       "C-contiguous"):
            comm.grouped_all_reduce([a, b])
    elif comm.size > 1:
        with pytest.raises(synk.Remote, match="grouped_all_reduce: rank 0 rejected its "
                                              "arguments: .*entry 1 is not C-contiguous"):
            comm.grouped_all_reduce([a, b])
    np.testing.assert_array_equal(a, np.ones(3, np.float32))


def test_lists_that_differ_between_the_ranks(comm):
    a, b = np.ones(2), np.ones(3)
    lists = [a, b] if comm.rank == 0 else [a]
    if comm.size == 1:
        comm.grouped_all_reduce(lists)
        return
    with pytest.raises(synk.InvalidUsage, match="grouped_all_reduce: the ranks' lists have "
                                                "different lengths"):
        comm.grouped_all_reduce(lists)
    c = np.ones(2 + comm.rank)
    with pytest.raises(synk.InvalidUsage, match="grouped_broadcast: entry 0 differs between the "
                                                "ranks"):
        comm.grouped_broadcast([c])


@pytest.mark.parametrize("arrays, match", [
    (np.ones(3), "arrays must be a list or tuple of NumPy arrays, not ndarray \\(one array: "
                 "comm.all_reduce\\)"),
    ([np.ones(2), [1.0, 2.0]], "entry 1 is a list, not a NumPy array"),
    ([np.zeros(2, bool)], "entry 0 is a bool array: pass it to comm.all_reduce alone"),
    ([np.ones(2, ">f8")], "entry 0"),
])
def test_arguments_refused_on_every_rank(comm, arrays, match):
    with pytest.raises(synk.InvalidArgument, match="grouped_all_reduce: " + match):
        comm.grouped_all_reduce(arrays)


def test_an_array_listed_twice(comm):
    a = np.ones(4)
    with pytest.raises(synk.InvalidUsage, match="entry 1 overlaps entry 0"):
        comm.grouped_all_reduce([a, a[1:]])


def test_a_root_that_is_no_rank(comm):
    with pytest.raises(synk.InvalidArgument, match="grouped_broadcast: root 7 is not a rank"):
        comm.grouped_broadcast([np.ones(2)], root=7)
