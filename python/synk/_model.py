"""What Data, Shared and Function share: the communicator they default to, the registry of a
communicator's objects (in the order every rank made them), and the hook by which a call on the
master, between distribute() and close(), first brings the workers into the same call."""
import functools
import inspect

from . import _synk
from ._agree import error

_world = None


def world():
    """The communicator of every rank that Data, Shared, Function and distribute() use when
    given none (made at the first use; synk.Communicator() makes another)."""
    global _world
    if _world is None:
        _world = _synk.Communicator()
    return _world


class Registry:
    """A communicator's Data, Shared and Function objects, numbered in the order they were
    made: the master names an object to the workers by its number."""

    def __init__(self, comm):
        self.comm = comm
        self.objects = []
        self.driver = None  # set by distribute() while the master drives

    def add(self, obj):
        self.objects.append(obj)
        return len(self.objects) - 1

    def describe(self):
        return "\n".join("%s %s" % (type(o).__name__, o._describe()) for o in self.objects)

    def drives(self):
        """Whether a call here must first bring the workers in: on the master, serving, and
        not already inside a request (whose nested calls every rank makes anyway)."""
        return self.driver is not None and self.driver.drives()


def registry(comm):
    if comm is None:
        comm = world()
    reg = getattr(comm, "_synk_registry", None)
    if reg is None:
        if not isinstance(comm, _synk.Communicator):
            raise error(_synk.InvalidArgument,
                        "comm must be a synk.Communicator, not %s" % type(comm).__name__)
        reg = Registry(comm)
        comm._synk_registry = reg
    return reg


def driven(*master_only):
    """A method that, on the master between distribute() and close(), first brings every
    worker into the same call. The arguments named in `master_only` (a value only the master's
    counts) reach the workers as None; the others travel pickled, registered objects by
    number."""

    def wrap(method):
        signature = inspect.signature(method)

        @functools.wraps(method)
        def call(self, *args, **kwargs):
            if not self._registry.drives():
                return method(self, *args, **kwargs)
            bound = signature.bind(self, *args, **kwargs)
            for name in master_only:
                if name in bound.arguments:
                    bound.arguments[name] = None
            request = ("call", self._id, method.__name__, bound.args[1:], bound.kwargs)
            return self._registry.driver.drive(request, lambda: method(self, *args, **kwargs))

        return call

    return wrap
