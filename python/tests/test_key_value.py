"""synk.KeyValue: push and pull by key on NumPy arrays, update on the owner, callbacks, and the
errors of a bad array or a failing Updater, with exact values on every rank."""
import re
import sys
import threading
import time
import weakref

import numpy as np
import pytest

import synk


FOREIGN_F4 = (">" if sys.byteorder == "little" else "<") + "f4"  # not this machine's order


def triangle(n):
    return n * (n + 1) // 2  # the sum of rank+1 over n ranks


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.float16])
def test_push_pull_sums_every_key(comm, dtype):
    n = comm.size
    with synk.KeyValue(comm) as kv:
        kv.init_key(3, np.zeros(5, dtype))
        kv.init_key(7, np.zeros(2, dtype), op="max")
        k3 = np.full(5, comm.rank + 1, dtype)
        k7 = np.full(2, 10 * (comm.rank + 1), dtype)
        out7 = np.zeros(2, dtype)
        kv.push(7, k7, priority=2)
        kv.push(3, k3)
        kv.pull(3, k3)  # into the pushed array itself
        kv.pull(7, out7, 2)
        assert kv.pull_wait(3) is k3
        assert kv.pull_wait(7) is out7
        assert kv.count(3) == 5 and kv.owner(3) == -1
    np.testing.assert_array_equal(k3, np.full(5, triangle(n), dtype))
    np.testing.assert_array_equal(out7, np.full(2, 10 * n, dtype))


def test_join_for_uneven_inputs(comm):
    """Rank r has 1 + r batches, then joins (Horovod's hvd.join): each step's sum is over the
    ranks still running, and the max over them of values below 0 (a joined rank adds -inf)."""
    n, r = comm.size, comm.rank
    kv = synk.KeyValue(comm)
    kv.init_key(0, np.zeros(4, np.float32))
    kv.init_key(1, np.zeros(3, np.float64), op="max")
    for step in range(1 + r):
        s, m = np.zeros(4, np.float32), np.zeros(3)
        kv.push(0, np.full(4, r + 1, np.float32))
        kv.push(1, np.full(3, -(r + 1.0)))
        kv.pull(0, s)
        kv.pull(1, m)
        kv.pull_wait(0)
        kv.pull_wait(1)
        running = range(step, n)  # the ranks with more than `step` batches
        np.testing.assert_array_equal(s, np.full(4, sum(q + 1 for q in running), np.float32))
        np.testing.assert_array_equal(m, np.full(3, -(step + 1.0)))
    kv.join()
    with pytest.raises(synk.InvalidUsage, match="the KeyValue is closed"):
        kv.push(0, np.zeros(4, np.float32))


def test_pull_callback_runs_once_before_pull_wait_returns(comm):
    calls = []
    with synk.KeyValue(comm) as kv:
        kv.init_key(1, np.zeros(3, np.float32))
        a = np.ones(3, np.float32)
        kv.push(1, a)
        kv.pull(1, a, callback=lambda: calls.append(a.copy()))
        kv.pull_wait(1)
    assert len(calls) == 1
    np.testing.assert_array_equal(calls[0], np.full(3, comm.size, np.float32))


def test_other_threads_run_while_pull_wait_waits(comm):
    """Rank 0 waits in pull_wait for a rank 1 that pushes 0.3 s late; a thread of rank 0
    counts on meanwhile (pull_wait releases the GIL)."""
    counter, stop = [0], threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1

    with synk.KeyValue(comm) as kv:
        kv.init_key(0, np.zeros(1))
        if comm.rank == 1:
            stop.wait(0.3)
        t = threading.Thread(target=count)
        t.start()
        a = np.ones(1)
        kv.push(0, a)
        kv.pull(0, a)
        kv.pull_wait(0)
        stop.set()
        t.join()
    assert a[0] == comm.size
    if comm.rank == 0 and comm.size > 1:
        assert counter[0] > 1000


class Sgd(synk.Updater):
    def __init__(self, lr):
        super().__init__()
        self.lr = lr
        self.inits = []

    def init(self, key, weights):
        self.inits.append((key, weights.copy()))

    def update(self, key, grad, weights):
        weights -= self.lr * grad


def test_update_on_the_owner(comm):
    """Two steps of SGD (lr 0.1) from rank 0's weights, every rank pushing rank+1: each rank
    pulls the owner's weights, start - 0.2 * n(n+1)/2."""
    n, sgd = comm.size, Sgd(0.1)
    kv = synk.KeyValue(comm, sgd)
    start = np.array([1, 2, 3], np.float64)
    w = start + (0 if comm.rank == 0 else -99)  # only rank 0's initial weights count
    kv.init_key(10, w)
    for _ in range(2):
        kv.push(10, np.full(3, comm.rank + 1, np.float64))
        kv.pull(10, w)
        kv.pull_wait(10)
    owner = kv.owner(10)
    kv.close()
    np.testing.assert_allclose(w, start - 0.2 * triangle(n))
    assert 0 <= owner < n
    assert [k for k, _ in sgd.inits] == ([10] if comm.rank == owner else [])


@pytest.mark.parametrize("call, text", [
    (lambda kv: kv.push(1, np.ones(4, np.float32)), "holds 3 float32, but a has 4"),
    (lambda kv: kv.push(1, np.ones(3, np.float64)), "but a has 3 float64"),
    (lambda kv: kv.pull(1, np.ones((3, 2), np.float32)[:, 0]), "not C-contiguous"),
    (lambda kv: kv.push(1, np.ones(3, FOREIGN_F4)), "a has dtype .f4, which is not in this "
                                                     "machine's byte order"),
    (lambda kv: kv.pull(1, np.ones(3, FOREIGN_F4)), "out has dtype .f4, which is not in this "
                                                     "machine's byte order"),
    (lambda kv: kv.init_key(2, np.ones(3, FOREIGN_F4)), "weights has dtype .f4, which is not"),
    (lambda kv: kv.init_key(2, np.ones(3, np.bool_)), "weights is a bool array, which a key"),
    (lambda kv: kv.push(1, np.ones(3, np.bool_)), "a is a bool array, which a key cannot hold"),
])
def test_bad_arrays_are_refused_before_anything_starts(comm, call, text):
    with synk.KeyValue(comm) as kv:
        kv.init_key(1, np.zeros(3, np.float32))
        with pytest.raises(synk.InvalidArgument, match=text):
            call(kv)


def test_a_key_never_declared(comm):
    with synk.KeyValue(comm) as kv:
        with pytest.raises(synk.InvalidUsage, match="KeyValue.push: key 9 was not declared"):
            kv.push(9, np.ones(3, np.float32))


def test_a_list_is_a_type_error(comm):
    with synk.KeyValue(comm) as kv:
        kv.init_key(1, np.zeros(3, np.float32))
        with pytest.raises(TypeError):
            kv.push(1, [1.0, 2.0, 3.0])


class Failing(synk.Updater):
    def update(self, key, grad, weights):
        raise RuntimeError("no update today")


class Keeping(synk.Updater):
    """Keeps its arrays, and raises: they are its own, so they stay readable after the
    KeyValue is gone (they were views of synk's memory, freed with it)."""
    kept = []

    def update(self, key, grad, weights):
        weights += grad
        Keeping.kept += [grad, weights]
        raise RuntimeError("kept them")


@pytest.mark.parametrize("updater, words", [
    (Failing, "no update today"),
    (Keeping, "kept them")])
def test_an_updater_that_raises_fails_every_rank(comm, updater, words):
    kv = synk.KeyValue(comm, updater())
    kv.init_key(1, np.ones(2))
    a = np.ones(2)
    with pytest.raises(synk.Error) as got:  # in push itself on 1 rank, in pull_wait on more
        kv.push(1, a)
        kv.pull(1, a)
        kv.pull_wait(1)
    # The non-owners' message has the owner's words, each error's kind said once.
    assert "KeyValue: the Updater of key 1 threw: Updater.update " in str(got.value)
    assert words in str(got.value)
    owner = comm.rank == kv.owner(1)
    assert str(got.value).count("InvalidUsage") == (1 if owner else 0), str(got.value)
    if not owner:
        assert isinstance(got.value, synk.Remote)
    del kv  # the destructor waits for every rank, without raising
    if Keeping.kept:  # the owner's: grad (the sum of ones) and weights (1 + grad)
        np.testing.assert_array_equal(Keeping.kept[0], [comm.size] * 2)
        np.testing.assert_array_equal(Keeping.kept[1], [comm.size + 1] * 2)


def test_a_second_pull_before_pull_wait(comm):
    """Refused before the first pull's array is let go: the reduction still lands in it."""
    with synk.KeyValue(comm) as kv:
        kv.init_key(2, np.zeros(4, np.float32))
        first = np.ones(4, np.float32)
        kv.push(2, first)
        kv.pull(2, first)
        with pytest.raises(synk.InvalidUsage, match="key 2 is pulled again before pull_wait"):
            kv.pull(2, np.zeros(4, np.float32))
        assert kv.pull_wait(2) is first
    np.testing.assert_array_equal(first, np.full(4, comm.size, np.float32))


def push_when_taken(kv, key, a):
    """Pushes a as soon as synk takes it: once the key's result is in, and its callback done."""
    give_up = time.monotonic() + 30
    while True:
        try:
            return kv.push(key, a)
        except synk.InvalidUsage:
            assert time.monotonic() < give_up, "the next push was never taken"


def assert_the_next_push_is_reduced(kv, out, n):
    """After the pull_wait of key 0's pull into `out` (1 from each of n ranks), the key's next
    push (3 from each) was a temporary: memory is reused, where a freed push's array would
    now hold -100s, and the next result must still be 3 n."""
    junk = [np.full(out.size, -100.0, np.float32) for _ in range(4)]
    out2 = np.zeros(out.size, np.float32)
    kv.pull(0, out2)
    kv.pull_wait(0)
    del junk
    assert out[0] == n and (out2 == 3 * n).all(), np.unique(out2)[:5]


def test_a_push_taken_while_another_thread_is_in_pull_wait_keeps_its_array(comm):
    """A thread's pull_wait of key 0 and the main thread's next push of it, taken as soon as
    the result is in: the pull_wait let go of the new push's array (a temporary, freed and
    reused at once) instead of its own, and the next result summed junk."""
    n, size = comm.size, 1 << 18
    with synk.KeyValue(comm) as kv:
        kv.init_key(0, np.zeros(size, np.float32))
        for _ in range(60):
            out = np.zeros(size, np.float32)
            kv.pull(0, out)
            kv.push(0, np.full(size, 1.0, np.float32))
            waiter = threading.Thread(target=kv.pull_wait, args=(0,))
            waiter.start()
            push_when_taken(kv, 0, np.full(size, 3.0, np.float32))
            waiter.join()
            assert_the_next_push_is_reduced(kv, out, n)


def test_pull_wait_after_a_pull_whose_callback_raised_at_once(comm):
    """The result was there (on 1 rank a push is reduced in push itself), so pull ran the
    callback itself and raised; the pull stays open, and pull_wait returns its array."""
    if comm.size > 1:
        pytest.skip("on 1 rank the result is there when pull comes")

    def boom():
        raise ValueError("boom")

    with synk.KeyValue(comm) as kv:
        kv.init_key(0, np.zeros(3, np.float32))
        x = np.ones(3, np.float32)
        kv.push(0, x)
        with pytest.raises(synk.InvalidUsage, match="boom"):
            kv.pull(0, x, callback=boom)
        assert kv.pulling(0)
        assert kv.pull_wait(0) is x
        assert not kv.pulling(0)
    np.testing.assert_array_equal(x, np.ones(3, np.float32))


def test_the_next_push_made_before_pull_wait_keeps_its_array(comm):
    """synk takes a key's next push once its result is in, before pull_wait: that pull_wait
    lets go of the push it ends, not of the next one (a temporary, freed and reused)."""
    n, size = comm.size, 1 << 16
    with synk.KeyValue(comm) as kv:
        kv.init_key(0, np.zeros(size, np.float32))
        for _ in range(3):
            delivered = threading.Event()
            out = np.zeros(size, np.float32)
            kv.pull(0, out, callback=delivered.set)
            kv.push(0, np.full(size, 1.0, np.float32))
            assert delivered.wait(30)
            push_when_taken(kv, 0, np.full(size, 3.0, np.float32))  # before pull_wait
            assert kv.pull_wait(0) is out
            assert_the_next_push_is_reduced(kv, out, n)


def test_two_threads_waiting_for_one_pull(comm):
    """Both wait before the result is in (rank 0 pushes late): one gets the array, the other
    InvalidUsage. The second slept on until the key's next pull, and took its result."""
    with synk.KeyValue(comm) as kv:
        kv.init_key(1, np.zeros(4, np.float32))
        x = np.ones(4, np.float32)
        if comm.rank == 0:
            time.sleep(0.5)  # the other ranks' waiters are both in pull_wait meanwhile
        kv.push(1, x)
        kv.pull(1, x)
        outcomes = []

        def wait():
            try:
                outcomes.append(kv.pull_wait(1) is x)
            except synk.InvalidUsage as e:
                outcomes.append(str(e))

        waiters = [threading.Thread(target=wait) for _ in range(2)]
        for w in waiters:
            w.start()
        for w in waiters:
            w.join(20)
        assert not any(w.is_alive() for w in waiters), "a pull_wait never returned"
        assert outcomes.count(True) == 1, outcomes
        assert re.search("another thread is waiting for its pull|has no pull to wait for",
                         next(o for o in outcomes if o is not True))
        kv.push(1, x)
        kv.pull(1, x)
        assert kv.pull_wait(1) is x  # the next pull is its own
        np.testing.assert_array_equal(x, np.full(4, comm.size ** 2, np.float32))


def test_a_callback_that_drops_its_key_value(comm):
    """The last reference goes in the callback, on synk's thread: the KeyValue is let go on
    the main thread afterwards (it aborted every rank, waiting for its own thread)."""
    holder = {"kv": synk.KeyValue(comm)}
    kv = holder["kv"]
    kv.init_key(1, np.zeros(4, np.float32))
    x = np.ones(4, np.float32)
    dropped = threading.Event()

    def drop():
        holder.clear()
        dropped.set()

    released = threading.Event()
    weakref.finalize(kv, released.set)
    kv.pull(1, x, callback=drop)
    del kv
    holder["kv"].push(1, x)
    deadline = time.monotonic() + 30
    while not released.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)  # Python code, where the main thread lets it go (closing it)
    assert released.is_set(), "the KeyValue was never let go"
    comm.barrier()
    np.testing.assert_array_equal(x, np.full(4, comm.size, np.float32))
