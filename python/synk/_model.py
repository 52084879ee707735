"""What Data, Shared and Function share: the communicator they default to, the registry of a
communicator's objects (in the order every rank made them), and the hook by which a call on the
master, between distribute() and close(), first brings the workers into the same call."""
import functools
import inspect
import weakref

from . import _synk
from ._agree import error

_world = None
_distributed = weakref.WeakSet()  # the registries whose driver is serving


def world():
    """The communicator of every rank that Data, Shared, Function and distribute() use when
    given none (made at the first use; synk.Communicator() makes another)."""
    global _world
    if _world is None:
        if any(reg.driver is not None and reg.driver.is_master for reg in _distributed):
            # Made on the master alone, it would wait for the workers forever.
            raise error(_synk.InvalidUsage,
                        "synk.world() is made by every rank together: use it (or pass comm=) "
                        "before distribute(), not first on the master after it")
        _world = _synk.Communicator()
    return _world


def refuse_on_master_alone(what, comm=None):
    """InvalidUsage where the master, between distribute() and close() and outside a request,
    starts what every rank of a driven communicator (comm, or any: the world) must join: the
    workers serve requests and never would, and MPI would wait for them forever. Called by the
    binding before synk.Communicator() and split()."""
    for reg in list(_distributed):
        driver = reg.driver
        if (driver is not None and driver.drives() and reg.comm.size > 1 and
                (comm is None or reg.comm is comm)):  # with no workers, nothing waits
            raise error(_synk.InvalidUsage,
                        "%s on the master after distribute(): the workers serve its requests and "
                        "never join it, so it would wait forever; make it on every rank before "
                        "distribute() or after close()" % what)


class Registry:
    """A communicator's Data, Shared and Function objects, numbered in the order they were
    made: the master names an object to the workers by its number. It holds them weakly, so
    that a Data dropped by the program gives its node memory back, and forgets the dropped
    ones, so that a program making an object per step does not grow."""

    def __init__(self, comm):
        # The communicator holds the registry (comm._synk_registry) and each object holds the
        # communicator: a strong reference back would make a cycle, which the garbage collector
        # would break at another moment on each rank.
        self._comm = weakref.ref(comm)
        self._objects = {}  # number -> (weak reference, kind), the live ones
        self._made = 0      # numbers given so far
        self._dead = []     # numbers dropped since the last prune (weakref callbacks add them)
        self.driver = None  # set by distribute() while the master drives

    @property
    def comm(self):
        return self._comm()

    def _prune(self):
        # Here, not in the callbacks: the garbage collector may run those in the middle of a
        # walk over the dict.
        while self._dead:
            self._objects.pop(self._dead.pop(), None)

    def add(self, obj):
        self._prune()
        obj._held_comm = self.comm  # the registry's communicator lives as long as its objects
        number, dead = self._made, self._dead
        self._objects[number] = (weakref.ref(obj, lambda _ref: dead.append(number)),
                                 type(obj).__name__)
        self._made += 1
        return number

    def _live(self, number):
        entry = self._objects.get(number)
        return entry[0]() if entry is not None else None

    def get(self, number):
        """The object `number`; InvalidUsage where this rank has dropped it."""
        obj = self._live(number)
        if obj is None:
            entry = self._objects.get(number)
            kind = " (a %s)" % entry[1] if entry is not None else ""
            why = ("the program dropped it" if number < self._made else
                   "it was never made there")
            raise error(_synk.InvalidUsage, "distribute: object %d%s is gone on rank %d: %s"
                        % (number, kind, self.comm.rank, why))
        return obj

    def label(self, number):
        """"Function 'f'": the kind and name of object `number` on this rank."""
        obj = self._live(number)
        if obj is None:
            return "object %d (dropped)" % number
        return "%s '%s'" % (type(obj).__name__, getattr(obj, "name", number))

    def live(self):
        """The objects not dropped, in the order they were made."""
        self._prune()
        found = (self._live(number) for number in sorted(self._objects))
        return [obj for obj in found if obj is not None]

    def describe(self):
        """The live objects, "number kind details" a line, then how many were made."""
        self._prune()
        lines = []
        for number in sorted(self._objects):
            obj = self._live(number)
            if obj is not None:
                lines.append("%d %s %s" % (number, type(obj).__name__, obj._describe()))
        lines.append("made %d" % self._made)
        return "\n".join(lines)

    def drives(self):
        """Whether a call here must first bring the workers in: on the master, serving, and
        not already inside a request (whose nested calls every rank makes anyway)."""
        return self.driver is not None and self.driver.drives()


def described_objects(description):
    """A Registry.describe() text read back: a function of an object's number giving "Shared
    'a'", "(dropped)" or "(nothing)" (not made there), and how many were made."""
    lines = description.split("\n")
    made = int(lines[-1].split()[1])
    live = {}
    for line in lines[:-1]:
        number, _, text = line.partition(" ")
        if number.isdigit():  # (a name with a newline in it continues the line before)
            live[int(number)] = text
    return (lambda n: live.get(n, "(dropped)" if n < made else "(nothing)")), made


def registry(comm):
    if comm is None:
        comm = world()
    reg = getattr(comm, "_synk_registry", None)
    if reg is None:
        if not isinstance(comm, _synk.Communicator):
            hint = ""
            if type(comm).__module__.startswith("mpi4py"):
                hint = " (adopt an mpi4py communicator with synk.Communicator(comm) first)"
            raise error(_synk.InvalidArgument, "comm must be a synk.Communicator, not %s%s"
                        % (type(comm).__name__, hint))
        reg = Registry(comm)
        comm._synk_registry = reg
    return reg


def driven(*master_only, refuse=None):
    """A method that, on the master between distribute() and close(), first brings every
    worker into the same call. The arguments named in `master_only` (a value only the master's
    counts) reach the workers as None; the others travel pickled, registered objects by
    number. `refuse(self, arguments)` (the call's arguments by name, defaults included) says
    why a call cannot be driven (a result for a worker would reach nobody), or None: the
    master then raises InvalidArgument before anything is sent."""

    def wrap(method):
        signature = inspect.signature(method)

        @functools.wraps(method)
        def call(self, *args, **kwargs):
            if not self._registry.drives():
                return method(self, *args, **kwargs)
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()  # the workers get every argument, defaults spelt out
            why = refuse(self, bound.arguments) if refuse is not None else None
            if why:
                raise error(_synk.InvalidArgument, why)
            for name in master_only:
                if name in bound.arguments:
                    bound.arguments[name] = None
            request = ("call", self._id, method.__name__, bound.args[1:], bound.kwargs)
            return self._registry.driver.drive(request, lambda: method(self, *args, **kwargs))

        return call

    return wrap
