#!/usr/bin/env python3
# Usage: check_timeline.py MODE EXE MPIEXEC [MPIEXEC FLAGS...]
# Runs timeline_test (EXE) on 2 ranks with SYNK_TIMELINE set to a file in a fresh directory and
# checks the Chrome trace: it opens with "[", parses as JSON once "]" is appended, and has, for
# each rank (pid), its process_name, a named row (tid) per collective, balanced "running" spans
# with the bytes of each call, and one "queued" async span per non-blocking call (shm backend).
# MODE world: one file for both ranks. MODE split: the first communicator is one rank's own, so
# each process writes FILE.<rank> and nothing writes FILE.
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict

mode, exe, mpiexec = sys.argv[1], sys.argv[2], sys.argv[3:]
failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what)


def load(path):
    with open(path) as f:
        text = f.read()
    if not text.startswith("[\n"):
        fail(f"{path} does not open with '[': {text[:40]!r}")
    try:
        events = json.loads(text + "]")
    except ValueError as e:
        fail(f"{path} is not JSON once ']' is appended: {e}")
        return []
    print(f"{path}: {len(text)} bytes, {len(events)} events")
    return events


def check_rank(events, pid, suffix):
    mine = [e for e in events if e.get("pid") == pid]
    names = [e["args"]["name"] for e in mine if e["ph"] == "M" and e["name"] == "process_name"]
    if names != [f"rank {pid}"]:
        fail(f"pid {pid}: process_name events {names}, expected ['rank {pid}']")
    rows = {e["tid"]: e["args"]["name"] for e in mine
            if e["ph"] == "M" and e["name"] == "thread_name"}
    if len(set(rows.values())) != len(rows):
        fail(f"pid {pid}: a row is named twice: {rows}")
    tid = {name: t for t, name in rows.items()}
    for coll in ("all_reduce", "broadcast", "barrier"):
        if coll + suffix not in tid:
            fail(f"pid {pid}: no row named {coll + suffix!r} (rows: {sorted(tid)})")
            return
    # Spans nest per row: B and E balance, and no E comes before its B.
    stack = defaultdict(list)
    running = defaultdict(list)
    for e in sorted((e for e in mine if e["ph"] in "BE"), key=lambda e: e["ts"]):
        if e["ph"] == "B":
            stack[e["tid"]].append(e)
            if e["name"] == "running":
                running[rows.get(e["tid"])].append(e["args"]["bytes"])
        elif not stack[e["tid"]]:
            fail(f"pid {pid}: an E with no open B on row {rows.get(e['tid'])}")
        else:
            stack[e["tid"]].pop()
    for t, open_spans in stack.items():
        if open_spans:
            fail(f"pid {pid}: {len(open_spans)} span(s) never ended on row {rows.get(t)}")
    want = {"all_reduce": [4000, 2048, 2048, 2048, 4000], "broadcast": [40, 32], "barrier": [0]}
    for coll, sizes in want.items():
        got = running.get(coll + suffix, [])
        if got != sizes:
            fail(f"pid {pid}: 'running' on {coll + suffix} with bytes {got}, expected {sizes}")
    # The non-blocking calls waited in the queue: async b/e pairs, one per call, on their row.
    begins = {e["id"]: e for e in mine if e["ph"] == "b"}
    ends = {e["id"]: e for e in mine if e["ph"] == "e"}
    if set(begins) != set(ends):
        fail(f"pid {pid}: async begins {sorted(begins)} and ends {sorted(ends)} differ")
    queued = Counter((e["name"], e["args"]["bytes"], rows.get(e["tid"])) for e in begins.values()
                     if suffix in rows.get(e["tid"], ""))  # (split: not the part's calls)
    want_q = Counter({(f"all_reduce{suffix} queued", 2048, f"all_reduce{suffix}"): 3,
                      (f"broadcast{suffix} queued", 32, f"broadcast{suffix}"): 1})
    if queued != want_q:
        fail(f"pid {pid}: queued spans {dict(queued)}, expected {dict(want_q)}")
    for i, b in begins.items():
        if i in ends and ends[i]["ts"] < b["ts"]:
            fail(f"pid {pid}: queued span {i} ends before it begins")


tmp = tempfile.mkdtemp(prefix="synk_timeline_")
try:
    trace = os.path.join(tmp, "trace.json")
    env = dict(os.environ, SYNK_TIMELINE=trace)
    run = subprocess.run(mpiexec + ["-np", "2", exe, mode], env=env, timeout=50,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(run.stdout, end="")
    if run.returncode != 0:
        fail(f"timeline_test exited {run.returncode}")
    elif mode == "world":
        events = load(trace)
        if events:
            first = events[0]
            if first.get("name") != "process_name" or first.get("pid") != 0:
                fail(f"the first event is not rank 0's process_name: {first}")
            for pid in (0, 1):
                check_rank(events, pid, "")
        if sorted(os.listdir(tmp)) != ["trace.json"]:
            fail(f"files written: {sorted(os.listdir(tmp))}, expected only trace.json")
    else:
        if os.path.exists(trace):
            fail("trace.json was written although the first communicator was one rank's")
        for pid in (0, 1):
            path = f"{trace}.{pid}"
            if not os.path.exists(path):
                fail(f"{path} is missing")
                continue
            events = load(path)
            pids = {e.get("pid") for e in events}
            if pids != {pid}:
                fail(f"{path} has events of pids {pids}")
            check_rank(events, pid, " (comm 2)")  # the world communicator came second
finally:
    shutil.rmtree(tmp)

if failures:
    sys.exit(1)
print(f"timeline ({mode}): every check passed")
