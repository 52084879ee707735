"""synk.Data: an array held once per node, rank 0's value on every rank, and each rank's share
of a batch of its rows."""
import gc
import weakref

import numpy as np
import pytest

import synk
from conftest import selection

STRUCT = np.dtype([("id", np.int32), ("pos", np.float64, (2,)), ("tag", "S3")])


def sample(shape, dtype):
    """A value of `shape` and `dtype` whose rows all differ (exact in every dtype used)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype.names:
        a = np.zeros(shape, dtype)
        flat = a.reshape(-1)
        flat["id"] = np.arange(n) * 3 - 7
        flat["pos"] = np.stack([np.arange(n) / 4, -np.arange(n) * 2.5], axis=1)
        flat["tag"] = [b"r%02d" % (i % 100) for i in range(n)]
        return a
    if dtype == np.bool_:
        return (np.arange(n) % 3 == 0).reshape(shape)
    return (np.arange(n) % 120 + 1).astype(dtype).reshape(shape)


def every_rank(comm, a):
    """Every rank's copy of the array `a` (its bytes), as a list indexed by rank."""
    raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    size = comm.all_gather(np.array([raw.size], np.int64))
    assert (size == raw.size).all(), size  # the same number of bytes everywhere
    return [row.view(a.dtype).reshape(a.shape) for row in comm.all_gather(raw.copy())]


def assert_same_everywhere(comm, a, expected):
    assert a.shape == expected.shape and a.dtype == expected.dtype, (a.shape, a.dtype)
    np.testing.assert_array_equal(a, expected)
    for copy in every_rank(comm, a):
        np.testing.assert_array_equal(copy, expected)


# ---- making one ----

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int16, np.uint8,
                                   np.bool_, STRUCT])
@pytest.mark.parametrize("shape", [(7,), (5, 3), (4, 2, 3), (0, 2)])
def test_value_of_rank_0_reaches_every_rank(comm, dtype, shape):
    expected = sample(shape, dtype)
    x = synk.Data(expected if comm.rank == 0 else None, comm=comm)
    assert x.shape == shape and len(x) == shape[0] and x.dtype == np.dtype(dtype)
    assert_same_everywhere(comm, x.value, expected)
    np.testing.assert_array_equal(np.asarray(x), expected)
    np.testing.assert_array_equal(x[...], expected)
    if shape[0]:
        np.testing.assert_array_equal(x[shape[0] - 1], expected[-1])
        np.testing.assert_array_equal(x[1:], expected[1:])


def test_an_aligned_structured_dtype(comm):
    dtype = np.dtype([("a", np.uint8), ("b", np.int32)], align=True)
    value = np.array([(1, 2), (3, 4), (5, 6)], dtype)
    x = synk.Data(value if comm.rank == 0 else None, comm=comm)
    assert x.dtype == dtype
    assert_same_everywhere(comm, x.value, value)


def test_other_ranks_values_are_ignored(comm):
    mine = np.full((3, 2), comm.rank, np.int32)
    x = synk.Data(mine, comm=comm)
    assert_same_everywhere(comm, x.value, np.zeros((3, 2), np.int32))


@pytest.mark.parametrize("dtype, given_dtype", [(np.float64, None), (np.uint8, np.uint8),
                                                (STRUCT, STRUCT)])
@pytest.mark.parametrize("everywhere", [False, True])
def test_shape_and_dtype_make_zeros(comm, dtype, given_dtype, everywhere):
    shape, dtype = (6, 4), np.dtype(dtype)
    if comm.rank == 0 or everywhere:
        x = synk.Data(shape=shape, dtype=given_dtype, comm=comm)
    else:
        x = synk.Data(comm=comm)
    expected_dtype = np.dtype(np.float32) if given_dtype is None else dtype
    assert_same_everywhere(comm, x.value, np.zeros(shape, expected_dtype))


def test_value_converted_to_the_dtype_given(comm):
    x = synk.Data([[1, 2], [3, 4]] if comm.rank == 0 else None, dtype=np.int16, comm=comm)
    assert_same_everywhere(comm, x.value, np.array([[1, 2], [3, 4]], np.int16))
    y = synk.Data(7 * np.ones(3, np.uint8) if comm.rank == 0 else None, comm=comm)
    assert y.dtype == np.uint8


def test_a_data_dropped_by_the_program_is_freed(comm):
    x = synk.Data(np.ones((4, 2)) if comm.rank == 0 else None, comm=comm)
    view, gone = x.value, weakref.ref(x)
    del x
    gc.collect()
    assert gone() is None  # the registry holds it weakly
    np.testing.assert_array_equal(view, np.ones((4, 2)))  # a view keeps its segment


def test_value_is_a_read_only_view(comm):
    x = synk.Data(sample((4, 2), np.float32) if comm.rank == 0 else None, comm=comm, name="ro")
    assert x.name == "ro"
    v = x.value
    assert not v.flags.writeable
    with pytest.raises(ValueError):
        v[0, 0] = 5
    with pytest.raises(ValueError):
        x[1][...] = 5
    with pytest.raises(ValueError):
        v.setflags(write=True)
    assert np.shares_memory(x.value, v)  # the segment itself, not a copy
    assert_same_everywhere(comm, x.value, sample((4, 2), np.float32))


# ---- take ----

N = 11


BATCHES = [None, 0, 1, 4, N, slice(None), slice(2, 9), slice(None, None, 3), slice(1, None, 4),
           slice(None, None, -1), slice(9, 1, -3), slice(-4, None), slice(5, 5), slice(20, 30),
           slice(None, None, -5), np.array([10, 0, 3, 3, 7]), [4], [], np.array([2, 9], np.uint16),
           np.arange(N)[::-1].copy(), range(1, 10, 2)]


@pytest.mark.parametrize("batch", BATCHES, ids=repr)
def test_take_gives_each_rank_its_linspace_share(comm, batch):
    value = sample((N, 3), np.int32)
    x = synk.Data(value if comm.rank == 0 else None, comm=comm)
    sel = selection(batch if not isinstance(batch, range) else slice(batch.start, batch.stop,
                                                                     batch.step), N)
    m = len(sel)
    mine = sel[comm.rank * m // comm.size:(comm.rank + 1) * m // comm.size]
    got = x.take(batch)
    assert got.shape == (len(mine), 3) and got.dtype == np.int32
    np.testing.assert_array_equal(got, value[mine])
    is_range = batch is None or isinstance(batch, (int, slice, range))
    if len(mine):
        assert np.shares_memory(got, x.value) == is_range
    # The shares, in rank order, are the whole selection.
    np.testing.assert_array_equal(comm.all_gather(np.array([len(mine)], np.int64))[:, 0],
                                  [(r + 1) * m // comm.size - r * m // comm.size
                                   for r in range(comm.size)])
    whole = comm.gatherv(np.ascontiguousarray(got), 0)
    if comm.rank == 0:
        np.testing.assert_array_equal(whole, value[sel])


def test_take_of_a_structured_and_a_3d_data(comm):
    for shape, dtype in [((9,), STRUCT), ((9, 2, 2), np.uint8)]:
        value = sample(shape, dtype)
        x = synk.Data(value if comm.rank == 0 else None, comm=comm)
        for batch in (slice(None, None, -2), [8, 1, 1]):
            sel = np.arange(9)[batch]
            mine = sel[comm.rank * len(sel) // comm.size:(comm.rank + 1) * len(sel) // comm.size]
            got = x.take(batch)
            assert got.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(got, value[mine])


@pytest.mark.parametrize("batch, text", [
    ([0, N], "index %d .*position 1.* %d rows" % (N, N)),
    (np.array([3, -1, 2]), "index -1 "),
    (N + 1, "batch %d" % (N + 1)),
    (-1, "batch -1"),
    (np.zeros((2, 2), np.int64), "1-d array"),
    (np.array([0.5, 1.0]), "1-d array of row indices"),
    ("rows", "1-d array"),
])
def test_take_out_of_range_raises_on_every_rank(comm, batch, text):
    x = synk.Data(sample((N, 2), np.float64) if comm.rank == 0 else None, comm=comm)
    with pytest.raises(synk.InvalidArgument, match=text):
        x.take(batch)
    comm.barrier()


# ---- changing it ----

@pytest.mark.parametrize("rows", [5, 2, 9, 0])
def test_set_value_same_or_other_row_count(comm, rows):
    x = synk.Data(sample((5, 3), np.float64) if comm.rank == 0 else None, comm=comm)
    old_view = x.value
    new = -sample((rows, 3), np.float64)
    x.set_value(new if comm.rank == 0 else None)
    assert x.shape == (rows, 3) and len(x) == rows
    assert_same_everywhere(comm, x.value, new)
    if rows == 5:
        np.testing.assert_array_equal(old_view, new)  # in place: same rows, same segment
    x.set_value(2 * new if comm.rank == 0 else np.ones((1, 3)))  # only rank 0's counts
    assert_same_everywhere(comm, x.value, 2 * new)


def test_set_value_converts_to_the_data_dtype(comm):
    x = synk.Data(np.zeros(4, np.uint8) if comm.rank == 0 else None, comm=comm)
    x.set_value([1.0, 2.0, 3.0] if comm.rank == 0 else None)
    assert_same_everywhere(comm, x.value, np.array([1, 2, 3], np.uint8))
    # Values the dtype cannot hold are refused on every rank, not truncated (2.7 became 2).
    for bad in ([2.7, 1.0], [300.0], [np.nan], [300], [-1]):
        with pytest.raises(synk.InvalidArgument, match="set_value: rank 0 gave values of dtype "
                                                       "(float|int)64 that a Data of uint8 cannot"):
            x.set_value(bad if comm.rank == 0 else None)
    assert_same_everywhere(comm, x.value, np.array([1, 2, 3], np.uint8))  # unchanged


@pytest.mark.parametrize("oversize", [1.0, 2.0])
def test_resize_keeps_the_contents(comm, oversize):
    value = sample((6, 2), np.int64)
    x = synk.Data(value if comm.rank == 0 else None, comm=comm, oversize=oversize)
    x.resize(10)
    assert x.shape == (10, 2)
    assert_same_everywhere(comm, x.value[:6], value)
    x.resize(3)
    assert x.shape == (3, 2)
    assert_same_everywhere(comm, x.value, value[:3])
    x.resize(0)
    assert x.shape == (0, 2) and x.value.shape == (0, 2)
    x.set_value(value[:4] if comm.rank == 0 else None)
    x.resize(40, 1.5)
    assert len(x) == 40
    assert_same_everywhere(comm, x.value[:4], value[:4])


def test_views_outlive_resize_and_free(comm):
    value = sample((8, 3), np.float32)
    x = synk.Data(value if comm.rank == 0 else None, comm=comm)
    before = x.value
    part = x.take(slice(None, None, 2))
    expected_part = part.copy()
    x.resize(1000)  # past the capacity: a new segment
    x.set_value(np.zeros((1000, 3), np.float32) if comm.rank == 0 else None)
    np.testing.assert_array_equal(before, value)  # the old segment, still mapped
    np.testing.assert_array_equal(part, expected_part)
    big = x.value
    x.free()
    assert x.shape == (0, 3) and len(x) == 0 and x.value.shape == (0, 3)
    assert big.shape == (1000, 3) and not big.any()
    np.testing.assert_array_equal(before, value)
    assert x.take().shape == (0, 3)
    x.resize(2)  # a freed data grows again
    assert x.shape == (2, 3)
    x.set_value(value[:2] if comm.rank == 0 else None)
    assert_same_everywhere(comm, x.value, value[:2])


# ---- load ----

def test_load_runs_once_per_node_on_local_rank_0(comm):
    shape = (7, 2)
    x = synk.Data(shape=shape, dtype=np.int32, comm=comm)
    ran = []

    def loader(a):
        ran.append(comm.rank)
        assert a.shape == shape and a.dtype == np.int32 and a.flags.writeable
        a[...] = np.arange(14, dtype=np.int32).reshape(shape) * 3

    x.load(loader)
    assert ran == ([comm.rank] if comm.local_rank == 0 else [])
    runs = comm.all_gather(np.array([len(ran)], np.int64))[:, 0]
    assert runs.sum() == comm.num_nodes
    assert_same_everywhere(comm, x.value, np.arange(14, dtype=np.int32).reshape(shape) * 3)
    assert not x.value.flags.writeable  # writable for the loader only


class LoaderFailed(Exception):
    pass


def test_loader_that_raises_is_an_error_on_every_rank(comm):
    x = synk.Data(shape=(3,), dtype=np.float64, comm=comm)

    def loader(a):
        raise LoaderFailed("no such file: images.npy")

    # The loader's own exception where it raised, as a Function body's; synk.Remote elsewhere.
    with pytest.raises((LoaderFailed, synk.Remote), match="no such file: images.npy") as info:
        x.load(loader)
    assert info.type is (LoaderFailed if comm.local_rank == 0 else synk.Remote)
    x.load(lambda a: a.fill(2.5))  # the data is still usable
    assert_same_everywhere(comm, x.value, np.full(3, 2.5))


def test_the_others_take_rank_0s_oversize(comm):
    x = synk.Data(np.arange(4.0) if comm.rank == 0 else None, oversize=2.0 if comm.rank == 0
                  else 1.0, comm=comm)
    view = x.value
    x.set_value(np.arange(8.0) + 1 if comm.rank == 0 else None)  # within the 2x room: in place
    assert_same_everywhere(comm, view, np.arange(4.0) + 1)


def test_resize_and_load_refuse_what_is_not_a_count_or_a_function(comm):
    x = synk.Data(np.arange(4.0) if comm.rank == 0 else None, comm=comm)
    for rows in (-1, 2.5, True):
        with pytest.raises(synk.InvalidArgument, match=r"Data.resize: rows .* \(an int, 0 or "):
            x.resize(rows)
    with pytest.raises(synk.InvalidArgument, match="the loader must be a function of the array, "
                                                   "not a int"):
        x.load(5)
    assert_same_everywhere(comm, x.value, np.arange(4.0))


def test_array_copies_only_when_asked(comm):
    x = synk.Data(np.arange(4, dtype=np.float32) if comm.rank == 0 else None, comm=comm)
    as_is = x.__array__()
    assert not as_is.flags.writeable  # the node's rows themselves
    copied = x.__array__(copy=True)
    copied[0] = 9  # a copy of its own
    converted = x.__array__(np.float64, copy=None)  # NumPy 2's "copy if needed"
    np.testing.assert_array_equal(converted, np.arange(4.0))
    assert converted.dtype == np.float64
    with pytest.raises(ValueError, match="copy=False, but float32 to float64 needs a copy"):
        x.__array__(np.float64, copy=False)  # NumPy 2's "never copy"
    assert_same_everywhere(comm, x.value, np.arange(4, dtype=np.float32))


# ---- errors ----

def test_rank_0_gives_neither_value_nor_shape(comm):
    with pytest.raises(synk.InvalidArgument, match="rank 0 gave neither a value nor a shape"):
        synk.Data(None if comm.rank == 0 else np.ones(3), comm=comm)
    comm.barrier()


@pytest.mark.parametrize("make, text", [
    (lambda: np.array([object(), 1, "a"], dtype=object), "dtype object has no fixed size"),
    (lambda: np.zeros(3, [("a", np.int32), ("o", object)]), "no fixed size"),
    (lambda: np.float64(3.0), "needs a first axis"),
])
def test_values_it_cannot_hold(comm, make, text):
    with pytest.raises(synk.InvalidArgument, match=text):
        synk.Data(make() if comm.rank == 0 else None, comm=comm)
    with pytest.raises(synk.InvalidArgument):
        synk.Data(shape=(2, -1) if comm.rank == 0 else None, comm=comm)
    comm.barrier()


def test_set_value_with_rows_of_another_shape(comm):
    x = synk.Data(sample((4, 3), np.float32) if comm.rank == 0 else None, comm=comm, name="pts")
    with pytest.raises(synk.InvalidArgument, match=r"'pts'.*rows of shape \(2,\).*\(3,\)"):
        x.set_value(np.zeros((4, 2)) if comm.rank == 0 else None)
    assert_same_everywhere(comm, x.value, sample((4, 3), np.float32))  # unchanged


def test_set_value_with_a_0d_value(comm):
    x = synk.Data(np.ones(2) if comm.rank == 0 else None, comm=comm)
    try:
        with pytest.raises(synk.InvalidArgument, match="0-d value"):
            x.set_value(np.float64(5) if comm.rank == 0 else None)
    finally:
        assert_same_everywhere(comm, x.value, np.ones(2))  # unchanged


def test_a_value_that_overflows_the_dtype_fails_on_every_rank(comm):
    """NumPy raises OverflowError (not a ValueError) on rank 0 alone: every rank refuses it."""
    x = synk.Data(np.zeros(3, np.int64) if comm.rank == 0 else None, comm=comm)
    with pytest.raises(synk.InvalidArgument, match="set_value: rank 0 gave"):
        x.set_value([2 ** 70, 0, 0] if comm.rank == 0 else None)
    assert_same_everywhere(comm, x.value, np.zeros(3, np.int64))
