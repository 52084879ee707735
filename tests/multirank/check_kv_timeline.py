#!/usr/bin/env python3
# Usage: check_kv_timeline.py EXE MPIEXEC [MPIEXEC FLAGS...]
# Runs key_value_test's TwoKeysPushPullWait and FusionBoundaries on 2 ranks with SYNK_TIMELINE
# and SYNK_FUSION_BYTES=4096, and checks the KeyValue rows of the trace: for every key of the
# run, on each rank, "pushed", a "queued" async span, "negotiated", a "fused" or "running" span
# and "done", with the key's bytes; and a "KeyValue fusion" row of fused buckets of at most
# 4096 bytes.
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict

exe, mpiexec = sys.argv[1], sys.argv[2:]
tmp = tempfile.mkdtemp()
try:
    path = os.path.join(tmp, "trace.json")
    env = dict(os.environ, SYNK_TIMELINE=path, SYNK_FUSION_BYTES="4096", SYNK_BACKEND="shm")
    run = subprocess.run(mpiexec + ["-np", "2", exe, "--gtest_filter=*TwoKeys*:*FusionBoundaries*"],
                         env=env, capture_output=True, text=True, timeout=60)
    print(run.stdout[-2000:], run.stderr[-2000:])
    if run.returncode != 0:
        sys.exit(f"FAIL: the test exited {run.returncode}")
    with open(path) as f:
        events = json.loads(f.read() + "]")
finally:
    shutil.rmtree(tmp)

rows = {}  # (pid, tid) -> row name
for e in events:
    if e["ph"] == "M" and e["name"] == "thread_name":
        rows[(e["pid"], e["tid"])] = e["args"]["name"]
seen = defaultdict(set)  # (pid, row) -> phases
fused_bytes = []
for e in events:
    row = rows.get((e["pid"], e.get("tid")))
    if row is None or not row.startswith("KeyValue"):
        continue
    if e["ph"] in "Bib":
        seen[(e["pid"], row)].add(e["name"])
    if row == "KeyValue fusion" and e["ph"] == "B":
        fused_bytes.append(e["args"]["bytes"])

failures = []
# TwoKeys: keys 3 and 7; FusionBoundaries: keys 0..500 (key 500 is larger than the buffer).
for pid in (0, 1):
    for key in [3, 7] + list(range(501)):
        phases = seen.get((pid, f"KeyValue key {key}"), set())
        want = {"pushed", "queued", "negotiated", "done"}
        if not want <= phases or not phases & {"fused", "running"}:
            failures.append(f"rank {pid} key {key}: phases {sorted(phases)}")
if not fused_bytes or max(fused_bytes) > 4096:
    failures.append(f"fused buckets: {fused_bytes[:10]}")
if "running" not in seen.get((0, "KeyValue key 500"), set()):
    failures.append("key 500 (40000 bytes) did not run alone")
for f in failures[:20]:
    print("FAIL: " + f)
if failures:
    sys.exit(1)
print(f"PASS: {len(events)} events; every key's phases on both ranks; "
      f"{len(fused_bytes)} fused buckets of at most {max(fused_bytes)} bytes")
