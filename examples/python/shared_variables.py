"""The Synkhronos walkthrough with synk for Python: a Shared variable s, a Data x held once per
node, and a Function whose update is s = column sums of (x * s) over the rows it is given; first
SPMD (every rank runs the program), then driven by the master alone after distribute().

Run: PYTHONPATH=build/python build/bin/synkrun -np 2 python3 examples/python/shared_variables.py
"""
import numpy as np

import synk


def text(a):
    """[1 1], [[3 3] [7 7]]: an array on one line."""
    return np.array2string(np.asarray(a), separator=" ",
                           formatter={"float_kind": lambda v: "%g" % v}).replace("\n", "")


def main():
    if synk.world().size < 2:
        raise SystemExit("shared_variables: run it on 2 or more ranks (set_value(1, ...) needs "
                         "a rank 1): synkrun -np 2 python3 %s" % __file__)
    master = synk.world().rank == 0

    def say(what, value):
        if master:
            print("%-47s %s" % (what, text(value)), flush=True)

    s = synk.Shared(np.ones(2, np.float32), name="s")
    x = synk.Data(np.array([[1, 1], [2, 2], [3, 3], [4, 4]], np.float32), name="x")

    # The update stays local to each rank, as in Synkhronos; the collectives are explicit.
    def update(rows):
        s.value = (rows * s.value).sum(axis=0)

    f = synk.Function(update, collect=[], name="update")

    say("s initial:", s.value)
    f.local(x)
    say("s after a local call on all of x:", s.value)
    s.value = np.ones(2, np.float32)
    f(x)
    say("after a distributed call, the master's s:", s.value)
    say("gather(s, nd_up=1):", s.gather(nd_up=1))
    s.reduce(op="sum")
    say("after reduce(s, sum), the master's s:", s.value)
    say("gather(s, nd_up=1):", s.gather(nd_up=1))
    s.broadcast(np.ones(2, np.float32))
    f(x)
    s.all_reduce(op="sum")
    say("after broadcast, a call and all_reduce(s, sum):", s.gather(nd_up=1))

    # Master-driven, as in Synkhronos: rank 0 runs the rest alone and the others serve it.
    pixels = synk.Data(np.arange(1, 7, dtype=np.uint8).reshape(3, 2), name="pixels")
    mean_pixel = synk.Function(lambda rows: rows.mean() if len(rows) else 0.0,
                               collect="weighted_avg", name="mean_pixel")
    if synk.distribute():
        say("master-driven: mean pixel (weighted_avg):", [mean_pixel(pixels)])
        s.broadcast(np.ones(2, np.float32))
        f(x)
        s.all_reduce(op="sum")
        say("broadcast, a call, all_reduce(s, sum):", s.value)
        s.set_value(1, np.array([5, 5], np.float32))
        say("set_value(1, [5 5]), then get_value(1):", s.get_value(1))
        s.value = np.arange(6, dtype=np.float32).reshape(3, 2)
        s.scatter()
        say("scatter of 0..5 as 3 rows of 2, get_value(1):", s.get_value(1))
        x.set_value(np.full((4, 2), 2, np.float32))
        s.broadcast(np.ones(2, np.float32))
        f(x)
        s.all_reduce(op="sum")
        say("x.set_value(all 2) after distribute(), a call:", s.value)
        synk.close()


if __name__ == "__main__":
    main()
