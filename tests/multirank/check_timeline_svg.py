#!/usr/bin/env python3
"""scripts/timeline_svg.py on a trace as SYNK_TIMELINE writes it (no closing "]"), on one whose
process was killed in the middle of an event, and on what it cannot use (exit 2, one line).
Usage: check_timeline_svg.py TIMELINE_SVG_PY"""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]
work = tempfile.mkdtemp()
failures = []


def run(*args):
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def write(name, text):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def expect(cond, what, out=""):
    if not cond:
        failures.append(f"{what}\n{out}")


events = ['{"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"rank 0"}}',
          '{"name":"thread_name","ph":"M","pid":0,"tid":1,"args":{"name":"all_reduce"}}']
for i in range(3):
    t = 1000 + 100 * i
    events += ['{"name":"running","ph":"B","pid":0,"tid":1,"ts":%d.000,"args":{"bytes":8}}' % t,
               '{"ph":"E","pid":0,"tid":1,"ts":%d.500}' % (t + 10)]
whole = write("whole.json", "[\n" + ",\n".join(events))
# A process killed in a write: the last event cut short (as one run in sixteen was).
cut = write("cut.json", "[\n" + ",\n".join(events) + ',\n{"ph":"E","pid":0,"tid":1,"ts":99')
cut_in_args = write("cut2.json", "[\n" + ",\n".join(events) + ',\n{"name":"running","ph":"B",'
                    '"pid":0,"tid":1,"ts":2000.000,"args":{"bytes":8}')

for trace in (whole, cut, cut_in_args):
    rc, out = run(trace, os.path.join(work, "t.svg"), "--after-us", "0", "--length-us", "400")
    expect(rc == 0 and "1 rows, 3 shapes" in out, f"{trace}: draw", out)
    rc, out = run("--json", trace, os.path.join(work, "t.json"))
    expect(rc == 0, f"{trace}: --json", out)
    if rc == 0:
        with open(os.path.join(work, "t.json")) as f:
            expect(len(json.load(f)) == len(events), f"{trace}: --json keeps the whole events")

rc, out = run(whole, os.path.join(work, "t.svg"), "--start-us", "1", "--length-us", "10")
expect(rc == 0 and "no row has events in this window" in out, "an empty window is said", out)
svg, nowhere = os.path.join(work, "o.svg"), os.path.join(work, "no", "dir", "o.svg")
for args, message in [
        ((os.path.join(work, "none.json"), svg), "cannot read"),
        ((write("bad.json", "not json at all"), svg), "is not a SYNK_TIMELINE trace"),
        ((write("meta.json", "[\n" + events[0]), svg), "has no timed events"),
        ((whole, svg, "--rows", "("), "is not a regular expression"),
        ((whole, svg, "--length-us", "-5"), "--length-us must be above 0"),
        ((whole, nowhere), "cannot write")]:
    rc, out = run(*args)
    expect(rc == 2 and message in out and "Traceback" not in out, f"{args}: {message}", out)

if failures:
    print("FAIL\n" + "\n".join(failures))
    sys.exit(1)
print("timeline_svg.py: whole and cut traces drawn and written as JSON; bad input is exit 2")
