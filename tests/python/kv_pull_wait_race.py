"""A pull_wait on another thread while pull() hands its pull to synk (without the GIL): it is
refused, and must leave the pull's arrays alone. It took them: synk then read a freed push and
wrote into a freed out (wrong sums, pull_wait returning None). Rank 0 waits on a second thread
that retries a refused pull_wait; threads polling kv.pulling() move the GIL around. Run with
ranks not bound to one core each (synkrun --bind none), or the threads rarely interleave.

    synkrun --bind none -np 2 python3 kv_pull_wait_race.py [STEPS]

Exit 1 where a step went wrong."""
import sys
import threading
import time

import numpy as np

import synk

comm = synk.Communicator()
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 600
size = 1 << 12
want = comm.size * (comm.size + 1) / 2
kv = synk.KeyValue(comm)
kv.init_key(0, np.zeros(size, np.float32))
kv.init_key(1, np.zeros(1, np.float32))
stop = threading.Event()


def poll():
    while not stop.is_set():
        kv.pulling(1)


pollers = [threading.Thread(target=poll) for _ in range(2)]
for t in pollers:
    t.start()
wrong = 0
for step in range(steps):
    out = np.zeros(size, np.float32)
    got = []
    if comm.rank == 0:
        def wait_for_the_pull():
            while True:
                try:
                    got.append(kv.pull_wait(0))
                    return
                except synk.InvalidUsage:  # no pull yet: try again
                    pass
        waiter = threading.Thread(target=wait_for_the_pull)
        waiter.start()
        kv.push(0, np.full(size, comm.rank + 1.0, np.float32))  # held by synk until pull_wait
        kv.pull(0, out)
        reuse = [np.full(size, 1e6, np.float32) for _ in range(4)]  # would take freed memory
        waiter.join()
        del reuse
    else:
        time.sleep(0.001)
        kv.push(0, np.full(size, comm.rank + 1.0, np.float32))
        kv.pull(0, out)
        got.append(kv.pull_wait(0))
    if got[0] is not out or out.min() != want or out.max() != want:
        wrong += 1
        print(comm.rank, "step", step, "pull_wait gave", type(got[0]).__name__, "sums from",
              out.min(), "to", out.max(), "want", want, flush=True)
stop.set()
for t in pollers:
    t.join()
kv.close()
print(comm.rank, "steps", steps, "wrong", wrong, flush=True)
sys.exit(1 if wrong else 0)
