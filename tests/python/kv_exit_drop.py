"""At exit synk closes the KeyValues still open, the last made first, each without the GIL. A
daemon thread that drops another KeyValue's last reference meanwhile must not destroy it under
the closing loop (it did: a segfault in KeyValue::close). Exit 0 on every rank."""
import os
import tempfile
import threading
import time

import numpy as np

import synk

comm = synk.Communicator()
holder = {"first": synk.KeyValue(comm)}  # made first: closed last
second = synk.KeyValue(comm)             # closed first, rank 0 waiting there for rank 1
for kv in (holder["first"], second):
    kv.init_key(0, np.zeros(4, np.float32))
# Rank 0's thread says here when it has dropped the first KeyValue; rank 1 exits only then.
dropped = comm.broadcast_object(tempfile.mktemp(prefix="synk-kv-exit-drop-"))


def drop_while_closing():
    while threading.main_thread().is_alive():  # until the interpreter's exit begins
        time.sleep(0.001)
    time.sleep(0.2)  # rank 0 is in second's close by now
    holder.clear()
    print(comm.rank, "dropped the first KeyValue while closing", flush=True)
    open(dropped, "w").close()
    time.sleep(60)


if comm.rank == 0:
    threading.Thread(target=drop_while_closing, daemon=True).start()
else:
    deadline = time.monotonic() + 30
    while not os.path.exists(dropped) and time.monotonic() < deadline:
        time.sleep(0.01)  # rank 0's exit waits in second's close meanwhile
    if os.path.exists(dropped):
        os.remove(dropped)
print(comm.rank, "main ends", flush=True)
