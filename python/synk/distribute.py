"""Master-driven mode, the Synkhronos way: after distribute(), rank 0 runs the program alone and
the other ranks serve it. Every Function call and every Data or Shared collective the master
makes brings the workers into the same call, until close().

    f = synk.Function(step, collect="avg")    # on every rank, before distribute()
    if synk.distribute():                     # the workers serve here, then exit
        x = synk.Data(images)                 # the master alone from here on
        loss = f(x, batch=slice(0, 512))
        synk.close()
"""
import atexit
import io
import pickle
import sys
import weakref

from . import _synk
from ._agree import bcast_object, describe, error, first_failure
from ._model import _distributed, described_objects, registry


class _Pickler(pickle.Pickler):
    """Pickles a request, naming the registry's objects by number."""

    def __init__(self, file, reg):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.reg = reg

    def persistent_id(self, obj):
        if getattr(obj, "_registry", None) is self.reg and hasattr(obj, "_id"):
            return obj._id
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, reg):
        super().__init__(file)
        self.reg = reg

    def persistent_load(self, pid):
        return self.reg.get(pid)


class Driver:
    """The requests of one distribute(): sent by the master, served by the workers."""

    def __init__(self, reg):
        self.reg = reg
        self.channel = _synk._RequestChannel(reg.comm)
        self.is_master = reg.comm.rank == 0
        self.driving = False  # the master is inside a request (its nested calls run as they are)
        self.closed = False
        self.failure = None  # why no request can follow
        self.alone = False  # the failure was the master's alone: the workers come back from it
        # A worker's objects made at the master's request, by number: held until the master
        # drops its own (its numbers travel with the next request) or closes.
        self.made = {}
        self.dropped = []  # on the master: numbers of such objects since dropped

    def drives(self):
        return self.is_master and not self.closed and not self.driving

    def made_here(self, obj):
        """On the master: `obj` was made after distribute(); once the program drops it, the
        workers drop theirs."""
        weakref.finalize(obj, self.dropped.append, obj._id)

    def drive(self, request, here):
        """Sends `request` to the workers, then runs `here`, the master's part."""
        if self.failure:
            raise error(_synk.InvalidUsage, "distribute: %s earlier; this job's ranks cannot be "
                                            "driven any more" % self.failure)
        # The list itself stays: the finalizers of made_here hold it.
        dropped = list(self.dropped)
        del self.dropped[:len(dropped)]
        payload = self._encode((dropped, request))
        self.driving = True
        self.channel.master_alone(False)
        try:
            self.channel.send(payload)
            self._agree_read(None)
            return here()
        except (_synk.Timeout, KeyboardInterrupt) as e:
            if getattr(e, "_synk_agreed", False):  # a Function body's, which every rank heard of
                raise
            # The master alone: the workers may still be in the request.
            self.failure = "a request failed on the master alone (%s)" % describe(e)
            self.alone = True
            raise
        except Exception as e:
            self._raise_if_peer_died(e)
            raise
        finally:
            self.driving = False
            self.channel.master_alone(not self.closed)

    def serve(self):
        """A worker's loop: runs the master's requests until close()."""
        rank = self.reg.comm.rank
        while True:
            payload = self.channel.receive()
            if payload is None:
                self.closed = True
                return
            try:
                try:
                    (dropped, request), why = self._decode(payload), None
                    for number in dropped:
                        self.made.pop(number, None)
                except Exception as e:  # noqa: BLE001 - reported to every rank below
                    request, why = None, "rank %d could not read it: %s" % (rank, describe(e))
                self._agree_read(why)
                self._execute(request)
            except Exception as e:  # noqa: BLE001 - the master got the same error; serve on
                self._raise_if_peer_died(e)

    def _encode(self, request):
        buf = io.BytesIO()
        try:
            _Pickler(buf, self.reg).dump(request)
        except Exception as e:  # noqa: BLE001 - nothing was sent: refused here alone
            raise error(_synk.InvalidArgument,
                        "distribute: the workers cannot be sent this call's arguments (%s). "
                        "Pass arrays, numbers and functions defined at a module's top level" % e)
        return buf.getvalue()

    def _decode(self, payload):
        return _Unpickler(io.BytesIO(payload), self.reg).load()

    def _agree_read(self, why):
        """Every rank learns whether a worker failed to read the request, before any rank
        starts it (a worker that cannot run it would leave the others in its collectives)."""
        failed = first_failure(self.reg.comm, why is not None, why or "")
        if failed:
            raise error(_synk.InvalidUsage, "distribute: the master's request: %s" % failed[1])

    def _execute(self, request):
        kind = request[0]
        if kind == "call":
            _, number, method, args, kwargs = request
            getattr(self.reg.get(number), method)(*args, **kwargs)
        elif kind == "new":
            _, cls, kwargs = request
            obj = cls(comm=self.reg.comm, **kwargs)
            self.made[obj._id] = obj

    def _raise_if_peer_died(self, e):
        deaths = self.channel.deaths()
        if not deaths:
            return
        self.failure = deaths  # "rank 1 (pid 7) died"
        raise error(_synk.Remote, "distribute: %s (rank %d then failed: %s)"
                    % (self.failure, self.reg.comm.rank, e)) from e


def _check_same_objects(reg):
    """Every rank made the same Data, Shared and Function objects, in the same order."""
    mine = reg.describe()
    masters = bcast_object(reg.comm, mine, 0, "distribute()")
    failed = first_failure(reg.comm, mine != masters, mine)
    if not failed:
        return
    rank, theirs = failed
    (ours, made_here), (other, made_there) = described_objects(masters), described_objects(theirs)
    at = next((n for n in range(max(made_here, made_there)) if ours(n) != other(n)), None)
    if at is None:  # the same objects, described alike but for a name's odd characters
        raise error(_synk.InvalidUsage, "distribute: every rank must make the same Data, Shared "
                                        "and Function objects in the same order; rank %d's "
                                        "differ from rank 0's" % rank)
    raise error(_synk.InvalidUsage,
                "distribute: every rank must make the same Data, Shared and Function objects in "
                "the same order; object %d is %s on rank 0 but %s on rank %d"
                % (at, ours(at), other(at), rank))


def distribute(comm=None, *, exit_workers=True):
    """From here rank 0 drives and the others serve (collective over comm, default the world).
    Returns True on the master. A worker serves until the master's close(), then exits the
    program (SystemExit(0)), or returns False with exit_workers=False."""
    reg = registry(comm)
    if reg.driver is not None:
        raise error(_synk.InvalidUsage, "distribute: already distributed; close() first")
    _check_same_objects(reg)
    driver = Driver(reg)
    reg.driver = driver
    _distributed.add(reg)
    if driver.is_master:
        atexit.register(_close_at_exit, driver)
        driver.channel.master_alone(True)
        return True
    try:
        driver.serve()
    finally:
        reg.driver = None
    if exit_workers:
        sys.exit(0)
    return False


def close(comm=None):
    """On the master: the workers leave distribute(). Elsewhere, or a second time, nothing.
    After a request that failed on the master alone the close still goes: the workers read it
    once back from that request (its collectives end them by SYNK_TIMEOUT at the latest), as in
    C++. After a rank died nothing is sent, and the job ends when the master does."""
    reg = registry(comm)
    driver = reg.driver
    if driver is None or not driver.is_master:
        return
    reg.driver = None
    driver.closed = True
    driver.channel.master_alone(False)
    if not driver.failure or driver.alone:
        driver.channel.send(None)


def _close_at_exit(driver):
    # A master that ends without close() (an exception, say) still lets the workers go.
    if driver.reg.driver is driver:
        try:
            close(driver.reg.comm)
        except Exception:  # noqa: BLE001 - at exit nothing is left to tell
            pass
