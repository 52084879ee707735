"""synk.distribute: rank 0 drives and the other ranks serve its Function calls and its Data and
Shared collectives, until synk.close(). Each test splits a fresh communicator, so that its
registry of objects starts empty."""
import numpy as np
import pytest

import synk

VALUE = (np.arange(24).reshape(8, 3) % 5 + 1).astype(np.float64)


def drive(c, master):
    """master() on rank 0 between distribute() and close(), the other ranks serving it; then
    every rank goes on together. Returns master()'s result on rank 0, None elsewhere. Where
    master() failed, close() still runs, and then every rank fails (rank 0 with its error)."""
    result, failure = None, None
    is_master = synk.distribute(c, exit_workers=False)
    assert is_master == (c.rank == 0)
    if is_master:
        try:
            result = master()
        except BaseException as e:  # noqa: BLE001 - raised below, once the workers are back
            failure = e
        finally:
            synk.close(c)
    failed = c.all_reduce(np.array([failure is not None], np.int64), op="max")[0]
    if failure is not None:
        raise failure
    if failed:
        pytest.fail("the master failed while driving")
    return result


def fill_with_row_numbers(a):
    """A loader the workers can be sent (by reference: a function at a module's top level)."""
    a[...] = np.arange(a.shape[0]).reshape((-1,) + (1,) * (a.ndim - 1)) * 10 + 1


def test_distribute_returns_true_on_the_master_only(comm):
    c = comm.split(0)
    assert drive(c, lambda: "driven") == ("driven" if c.rank == 0 else None)
    # Afterwards every rank makes its calls itself again, and can distribute once more.
    assert drive(c, lambda: 1 + 1) == (2 if c.rank == 0 else None)


@pytest.mark.parametrize("collect", [["avg", "sum", "gather", "weighted_avg"], "min", ["none"]])
def test_function_driven_gives_what_spmd_gives(comm, collect):
    c = comm.split(0)
    x = synk.Data(VALUE if c.rank == 0 else None, comm=c)
    modes = [collect] if isinstance(collect, str) else collect

    def body(rows, w):
        out = {"avg": rows.sum(axis=0) * w, "sum": rows.sum(axis=0), "gather": rows * w,
               "weighted_avg": rows.mean(axis=0) if len(rows) else np.zeros(3),
               "min": rows.min(axis=0, initial=99.0), "none": rows[:, 1]}
        return out[collect] if isinstance(collect, str) else [out[m] for m in modes]

    f = synk.Function(body, collect=collect, comm=c)
    calls = [dict(), dict(batch=5, num_slices=2), dict(batch=slice(None, None, -2), to_all=True),
             dict(batch=np.array([7, 1, 1, 4]), num_slices=3, root=c.size - 1, to_all=True),
             dict(batch=[2], to_all=True, num_slices=2)]

    def run_all():
        return [f(x, 0.5, **kw) for kw in calls]

    def refused_then_all():
        if c.size > 1:  # outputs collected at a worker would reach nobody
            with pytest.raises(synk.InvalidArgument, match="after distribute\\(\\) the outputs "
                                                           "are collected at the master"):
                f(x, 0.5, root=1)
        return run_all()

    spmd = run_all()
    driven = drive(c, refused_then_all)
    if c.rank == 0:
        for a, b in zip(spmd, driven):
            for u, v in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
                np.testing.assert_array_equal(u, v)


def test_shared_collectives_driven_by_the_master(comm):
    c = comm.split(0)
    size, last = c.size, c.size - 1
    s = synk.Shared(np.full(2, c.rank + 1.0), comm=c)
    rows = 2 * size + 1
    full = np.arange(rows * 2, dtype=np.float64).reshape(rows, 2)

    def master():
        s.all_reduce(op="sum")
        np.testing.assert_array_equal(s.value, np.full(2, size * (size + 1) / 2))
        np.testing.assert_array_equal(s.gather(), np.full((size, 2), size * (size + 1) / 2))
        s.broadcast(np.array([7.0, 8.0]))
        for r in range(size):
            np.testing.assert_array_equal(s.get_value(r), [7.0, 8.0])
        s.set_value(last, np.array([5.0, 6.0]))
        np.testing.assert_array_equal(s.get_value(last), [5.0, 6.0])
        np.testing.assert_array_equal(s.value, [5.0, 6.0] if last == 0 else [7.0, 8.0])
        assert s.get_shapes() == [(2,)] * size
        if last:  # a result at a worker would reach nobody: refused, nothing sent
            with pytest.raises(synk.InvalidArgument,
                               match="reduced to root %d: after distribute" % last):
                s.reduced(op="max", root=last)
            with pytest.raises(synk.InvalidArgument, match="gather to root %d" % last):
                s.gather(root=last)
            with pytest.raises(synk.InvalidArgument, match="a value with root %d: after "
                                                           "distribute" % last):
                s.broadcast(np.zeros(2), root=last)
        np.testing.assert_array_equal(s.reduced(op="max"), [7.0, 8.0] if last else [5.0, 6.0])
        s.value = full  # the master's own value, which scatter splits
        s.scatter()
        for r in range(size):
            np.testing.assert_array_equal(s.get_value(r),
                                          full[rows * r // size:rows * (r + 1) // size])
        np.testing.assert_array_equal(s.gather(nd_up=0), full)
        np.testing.assert_array_equal(s.all_gather(nd_up=0), full)
        return s.get_shapes()

    shapes = drive(c, master)
    # Every rank holds what the master's scatter gave it; calls are SPMD again.
    np.testing.assert_array_equal(s.value, full[rows * c.rank // size:rows * (c.rank + 1) // size])
    after = s.get_shapes()
    assert after == [(rows * (r + 1) // size - rows * r // size, 2) for r in range(size)]
    assert shapes == (after if c.rank == 0 else None)


def test_shared_scatter_of_data_driven(comm):
    c = comm.split(0)
    x = synk.Data(VALUE if c.rank == 0 else None, comm=c)
    s = synk.Shared(comm=c)
    batch = np.array([6, 2, 0, 7, 7])

    def master():
        s.scatter(data=x, batch=batch)
        return s.gather(nd_up=0)

    got = drive(c, master)
    if c.rank == 0:
        np.testing.assert_array_equal(got, VALUE[batch])
    mine = batch[len(batch) * c.rank // c.size:len(batch) * (c.rank + 1) // c.size]
    np.testing.assert_array_equal(s.value, VALUE[mine])


def test_data_changes_driven_by_the_master(comm):
    c = comm.split(0)
    x = synk.Data(VALUE if c.rank == 0 else None, comm=c)
    rows = synk.Function(lambda r: r, collect="gather", comm=c)  # every rank's rows of x
    new = -np.arange(15, dtype=np.float64).reshape(5, 3)

    def master():
        x.set_value(new)
        np.testing.assert_array_equal(rows(x), new)
        x.resize(40)
        got = rows(x)
        assert got.shape == (40, 3)
        np.testing.assert_array_equal(got[:5], new)
        x.resize(2)
        np.testing.assert_array_equal(rows(x), new[:2])
        x.set_value(VALUE)
        np.testing.assert_array_equal(rows(x, batch=slice(None, None, -1)), VALUE[::-1])
        x.load(fill_with_row_numbers)
        loaded = np.repeat(np.arange(8)[:, None] * 10 + 1, 3, axis=1).astype(np.float64)
        np.testing.assert_array_equal(rows(x), loaded)
        x.free()
        assert rows(x).shape == (0, 3)

    drive(c, master)
    assert x.shape == (0, 3)  # on every rank


def test_objects_made_by_the_master_exist_on_the_workers(comm):
    c = comm.split(0)
    x0 = synk.Data(VALUE if c.rank == 0 else None, comm=c)
    f = synk.Function(lambda rows, s: rows.sum(axis=0)[:2] + s.value, collect="sum", comm=c)
    g = synk.Function(lambda rows: rows, collect="gather", comm=c)
    value = np.arange(12, dtype=np.uint8).reshape(6, 2)

    def master():
        y = synk.Data(value, comm=c, name="new_y")
        z = synk.Data(shape=(4, 2), dtype=np.int32, comm=c)
        s = synk.Shared(np.array([10.0, 20.0]), comm=c, name="new_s")
        t = synk.Shared(comm=c)
        np.testing.assert_array_equal(g(y), value)
        np.testing.assert_array_equal(g(z), np.zeros((4, 2), np.int32))
        np.testing.assert_array_equal(s.gather(), np.tile([10.0, 20.0], (c.size, 1)))
        assert t.get_shapes() == [(0,)] * c.size and t.dtype == np.float32
        # The Shared travels as itself: each rank's body reads its own copy's value.
        np.testing.assert_array_equal(f(x0, s), VALUE.sum(axis=0)[:2] + c.size * s.value)
        return [y.name, s.name]

    assert drive(c, master) == (["new_y", "new_s"] if c.rank == 0 else None)


def test_dropped_objects_leave_the_registry(comm):
    """Objects made and dropped one per step: the registry keeps the live ones only, so a
    long run does not grow, and their numbers go on."""
    c = comm.split(0)
    kept = synk.Shared(np.zeros(2), comm=c)
    for _ in range(1000):
        synk.Shared(np.zeros(2), comm=c)
    last = synk.Shared(np.zeros(2), comm=c)
    reg = c._synk_registry
    assert reg.live() == [kept, last]
    assert len(reg._objects) <= 3
    assert (kept._id, last._id) == (0, 1001)


def test_objects_the_master_drops_after_distribute(comm):
    """Data made and dropped by the master in a loop: each call sees the newest, and the
    workers let theirs go with the next request (a body counts each rank's live Data)."""
    c = comm.split(0)
    total = synk.Function(lambda r: r.sum(), collect="sum", comm=c)

    def live_data():
        return sum(isinstance(obj, synk.Data) for obj in c._synk_registry.live())

    count = synk.Function(live_data, collect="max", comm=c)

    def master():
        sums = []
        for epoch in range(4):
            x = synk.Data(np.full((5, 2), float(epoch)), comm=c)
            sums.append(total(x))
            del x
        return sums, count()  # the last drop travels with this call

    assert drive(c, master) == (([0.0, 10.0, 20.0, 30.0], 0) if c.rank == 0 else None)


def test_a_function_made_after_distribute(comm):
    c = comm.split(0)
    x = synk.Data(VALUE if c.rank == 0 else None, comm=c)
    total = synk.Function(lambda r: r.sum(), collect="sum", comm=c)

    def master():
        with pytest.raises(synk.InvalidUsage, match="make Functions on every rank before "
                                                    "distribute"):
            synk.Function(lambda r: r.sum(), comm=c)
        return total(x)

    assert drive(c, master) == (VALUE.sum() if c.rank == 0 else None)


def test_arguments_the_workers_cannot_be_sent(comm):
    c = comm.split(0)
    x = synk.Data(shape=(4, 2), dtype=np.float64, comm=c)
    rows = synk.Function(lambda r: r, collect="gather", comm=c)
    total = synk.Function(lambda r, extra: r.sum() + extra(), collect="sum", comm=c)

    def master():
        with pytest.raises(synk.InvalidArgument, match="workers cannot be sent"):
            x.load(lambda a: a.fill(3))
        np.testing.assert_array_equal(rows(x), np.zeros((4, 2)))  # nothing ran, still serving
        with pytest.raises(synk.InvalidArgument, match="workers cannot be sent"):
            total(x, lambda: 1.0)
        x.load(fill_with_row_numbers)
        return rows(x)

    got = drive(c, master)
    if c.rank == 0:
        np.testing.assert_array_equal(got, np.repeat(np.arange(4)[:, None] * 10 + 1, 2, axis=1))
    np.testing.assert_array_equal(x.value[:, 0], np.arange(4) * 10 + 1)


class BodyFailed(Exception):
    pass


def test_a_body_error_while_driven(comm):
    c = comm.split(0)
    x = synk.Data(VALUE if c.rank == 0 else None, comm=c)

    def body(rows, bad):  # `bad` travels to the workers with each call
        if c.rank == bad:
            raise BodyFailed("rank %d's body" % c.rank)
        return rows.sum()

    f = synk.Function(body, collect="sum", comm=c, name="step")

    def master():
        for r in range(1, c.size):  # a worker fails: synk.Remote on the master
            with pytest.raises(synk.Remote, match="Function 'step': rank %d failed: BodyFailed: "
                                                  "rank %d's body" % (r, r)):
                f(x, r)
            assert f(x, -1) == VALUE.sum()  # the workers serve on
        with pytest.raises(BodyFailed, match="rank 0's body"):  # the master: its own error
            f(x, 0)
        return f(x, -1, num_slices=2)

    assert drive(c, master) == (VALUE.sum() if c.rank == 0 else None)
    assert f(x, -1, to_all=True) == VALUE.sum()  # SPMD again, every rank in step


@pytest.mark.parametrize("make", ["name", "collect", "extra", "kind"])
def test_ranks_that_made_different_objects(comm, make):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    c = comm.split(0)
    odd = c.rank == c.size - 1
    kept = [synk.Shared(np.ones(2), comm=c, name="w")]  # the registry holds objects weakly
    if make == "name":
        kept.append(synk.Shared(comm=c, name="b" if odd else "a"))
        text = "object 1 is Shared 'a' on rank 0 but Shared 'b' on rank %d" % (c.size - 1)
    elif make == "collect":
        kept.append(synk.Function(np.sum, collect="max" if odd else "sum", comm=c, name="f"))
        text = "object 1 is Function 'f' sum on rank 0 but Function 'f' max on rank %d" % (
            c.size - 1)
    elif make == "extra":
        if odd:
            kept.append(synk.Function(np.sum, collect=["sum", "gather"], comm=c, name="f"))
        text = r"object 1 is \(nothing\) on rank 0 but Function 'f' sum,gather on rank %d" % (
            c.size - 1)
    else:
        kept.append(synk.Function(np.sum, comm=c, name="v") if odd else synk.Shared(comm=c, name="v"))
        text = "object 1 is Shared 'v' on rank 0 but Function 'v' avg on rank %d" % (c.size - 1)
    with pytest.raises(synk.InvalidUsage, match="every rank must make the same Data, Shared and "
                                                "Function objects in the same order; " + text):
        synk.distribute(c, exit_workers=False)
    c.barrier()  # nobody serves: every rank is back
    assert c.all_reduce(np.ones(1), op="sum")[0] == c.size


def test_close_twice_and_distribute_twice(comm):
    c = comm.split(0)
    s = synk.Shared(np.full(1, float(c.rank)), comm=c)
    synk.close(c)  # never distributed: nothing
    if synk.distribute(c, exit_workers=False):
        with pytest.raises(synk.InvalidUsage, match="already distributed; close\\(\\) first"):
            synk.distribute(c, exit_workers=False)
        s.all_reduce(op="max")  # still driving
        synk.close(c)
        synk.close(c)  # harmless
    else:
        synk.close(c)  # on a worker: nothing
    np.testing.assert_array_equal(s.value, [c.size - 1.0])
    s.all_reduce(op="sum")  # SPMD again
    np.testing.assert_array_equal(s.value, [c.size * (c.size - 1.0)])


def test_on_one_rank_the_master_runs_everything(comm):
    c = comm.split(comm.rank)  # each rank alone
    assert c.size == 1
    x = synk.Data(VALUE, comm=c)
    f = synk.Function(lambda r: r.sum(axis=0), collect="sum", comm=c)
    assert synk.distribute(c, exit_workers=False) is True
    try:
        s = synk.Shared(np.ones(3), comm=c)
        s.all_reduce(op="sum")
        np.testing.assert_array_equal(s.value, np.ones(3))
        np.testing.assert_array_equal(f(x, batch=slice(1, 4)), VALUE[1:4].sum(axis=0))
        x.set_value(VALUE[:2] * 2)
        np.testing.assert_array_equal(x.value, VALUE[:2] * 2)
    finally:
        synk.close(c)
    comm.barrier()


def test_ranks_in_different_calls_are_told_not_paired(comm):
    """A Data made on the master alone before distribute(): its broadcast met the workers' check
    of the objects, which read rank 0's layout as its list of objects (or timed out). Each
    broadcast of an object now says which call sends it."""
    from synk._agree import bcast_object
    if comm.size == 1:
        pytest.skip("needs two ranks")
    if comm.rank == 0:
        assert bcast_object(comm, (8, 3), 0, "Data()") == (8, 3)
    else:
        with pytest.raises(synk.InvalidUsage, match=r"the ranks are in different calls: rank 0 "
                                                    r"in Data\(\), rank %d in distribute\(\)"
                                                    % comm.rank):
            bcast_object(comm, None, 0, "distribute()")
    assert bcast_object(comm, "same", 0, "Data()") == "same"
    comm.barrier()


def test_the_master_alone_cannot_make_a_world_or_split_what_it_drives(comm):
    """Between distribute() and close() the workers serve requests: a synk.Communicator() or a
    split of the driven communicator made by the master alone waited in MPI forever."""
    c = comm.split(0)

    def master():
        if c.size == 1:  # no workers: nothing waits, and both are made
            return synk.Communicator().size + c.split(0).size
        with pytest.raises(synk.InvalidUsage, match=r"synk.Communicator\(\) on the master after "
                                                    r"distribute\(\)"):
            synk.Communicator()
        with pytest.raises(synk.InvalidUsage, match="split on the master after distribute"):
            c.split(0)
        return "refused"

    want = 2 if c.size == 1 else "refused"
    assert drive(c, master) == (want if c.rank == 0 else None)
    assert c.split(0).size == c.size  # after close() every rank splits again


def test_the_masters_own_collectives_are_refused_while_it_drives(comm):
    """Between distribute() and close() the master's own all_reduce on the driven communicator,
    outside a request, waited for the workers until SYNK_TIMEOUT: they serve requests and never
    join it. It is refused at once; inside a Function's body, and after close(), it runs."""
    c = comm.split(0)

    def body(x):
        return c.all_reduce(np.ones(1)) + x

    f = synk.Function(body, collect="sum", comm=c)

    def master():
        ones = np.ones(2)
        if c.size > 1:
            for call in (lambda: c.all_reduce(ones), lambda: c.iall_reduce(ones).wait(),
                         lambda: c.barrier()):
                with pytest.raises(synk.InvalidUsage, match=r"on the master between "
                                                            r"distribute\(\) and close\(\)"):
                    call()
        else:  # no workers: nothing would wait
            assert c.all_reduce(ones)[0] == 1
        return f(np.zeros(1))[0]

    n = c.size
    assert drive(c, master) == (n * n if c.rank == 0 else None)
    assert c.all_reduce(np.ones(1))[0] == n  # after close() every rank calls it again
