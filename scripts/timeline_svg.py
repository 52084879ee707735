#!/usr/bin/env python3
"""Draws a window of a SYNK_TIMELINE trace as an SVG picture (no libraries needed).

Usage: scripts/timeline_svg.py TRACE OUT.svg [--start-us T | --after-us D] [--length-us L]
                               [--rows REGEX]
       scripts/timeline_svg.py --json TRACE OUT.json

One row per (rank, track) with events in the window: spans ("B"/"E") as boxes, async spans
("b"/"e", such as a key's "queued" wait) as thin bars under their row, points ("i") as ticks.
Times are the trace's own (its "ts", microseconds of the steady clock). Without --start-us or
--after-us the window starts at 60% of the trace's time, in steady work. A trace whose process
was killed may end in an event cut short: it is left out. --json writes the trace as strict
JSON (with its closing "]") instead of drawing it.
"""
import argparse
import json
import re
import sys
from collections import defaultdict

COLORS = {"running": "#4c78a8", "fused": "#f58518", "queued": "#bab0ac",
          "pushed": "#54a24b", "negotiated": "#b279a2", "done": "#e45756"}


class Unusable(Exception):
    """A trace or an argument this script cannot use: one line, exit 2."""


def load(path):
    """The trace's events. Its last line is left out where a killed process cut it short."""
    try:
        with open(path) as f:
            text = f.read().rstrip()
    except OSError as e:
        raise Unusable(f"cannot read {path}: {e.strerror}")
    tries = [text]
    if not text.endswith("]"):
        cut = text[:text.rfind("\n")].rstrip() if "\n" in text else text
        tries = [text.rstrip(",") + "\n]", cut.rstrip(",") + "\n]"]
    for i, attempt in enumerate(tries):
        try:
            events = json.loads(attempt)
            break
        except ValueError as e:
            if i == len(tries) - 1:
                raise Unusable(f"{path} is not a SYNK_TIMELINE trace: {e}")
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise Unusable(f"{path} is not a SYNK_TIMELINE trace (a JSON array of events)")
    return events


def collect(events, start, end, rows_re):
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    shapes = defaultdict(list)  # (pid, row name) -> [(kind, name, t0, t1)]
    open_spans = defaultdict(list)
    open_async = {}
    for e in sorted((e for e in events if e["ph"] != "M"), key=lambda e: e["ts"]):
        key = (e["pid"], names.get((e["pid"], e.get("tid")), "?"))
        if not rows_re.search(key[1]):
            continue
        t = e["ts"]
        if e["ph"] == "B":
            open_spans[key].append((e["name"], t))
        elif e["ph"] == "E" and open_spans[key]:
            name, t0 = open_spans[key].pop()
            if t >= start and t0 <= end:
                shapes[key].append(("span", name, t0, t))
        elif e["ph"] == "b":
            open_async[e["id"]] = (key, e["name"], t)
        elif e["ph"] == "e" and e["id"] in open_async:
            k, name, t0 = open_async.pop(e["id"])
            if t >= start and t0 <= end:
                shapes[k].append(("async", name.split()[-1], t0, t))
        elif e["ph"] == "i" and start <= t <= end:
            shapes[key].append(("point", e["name"], t, t))
    return shapes


def draw(shapes, start, end, out):
    rows = sorted(shapes)
    left, width, row_h = 190, 900, 22
    scale = width / max(end - start, 1e-9)
    x = lambda t: left + (min(max(t, start), end) - start) * scale
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 20}" '
             f'height="{len(rows) * row_h + 60}" font-family="sans-serif" font-size="11">',
             f'<text x="{left}" y="14">{end - start:.0f} us from t = {start:.0f} us</text>']
    for i, (pid, name) in enumerate(rows):
        y = 24 + i * row_h
        parts.append(f'<text x="4" y="{y + 14}">rank {pid}: {name}</text>')
        for kind, what, t0, t1 in shapes[(pid, name)]:
            color = COLORS.get(what, "#888")
            if kind == "span":
                parts.append(f'<rect x="{x(t0):.1f}" y="{y + 2}" width="{max(x(t1) - x(t0), 1):.1f}" '
                             f'height="12" fill="{color}"><title>{what} {t1 - t0:.1f} us</title></rect>')
            elif kind == "async":
                parts.append(f'<rect x="{x(t0):.1f}" y="{y + 16}" width="{max(x(t1) - x(t0), 1):.1f}" '
                             f'height="3" fill="{color}"><title>{what} {t1 - t0:.1f} us</title></rect>')
            else:
                parts.append(f'<line x1="{x(t0):.1f}" x2="{x(t0):.1f}" y1="{y}" y2="{y + 16}" '
                             f'stroke="{color}"><title>{what}</title></line>')
    legend_y = 34 + len(rows) * row_h
    for j, (what, color) in enumerate(COLORS.items()):
        parts.append(f'<rect x="{left + j * 110}" y="{legend_y}" width="10" height="10" fill="{color}"/>'
                     f'<text x="{left + j * 110 + 14}" y="{legend_y + 9}">{what}</text>')
    parts.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(parts))


def window(a, events):
    """The window's start and end, in the trace's microseconds."""
    times = [e["ts"] for e in events if "ts" in e]
    if not times:
        raise Unusable(f"{a.trace} has no timed events")
    if a.length_us <= 0:
        raise Unusable(f"--length-us must be above 0, not {a.length_us:g}")
    if a.start_us is not None:
        start = a.start_us
    elif a.after_us is not None:
        start = min(times) + a.after_us
    else:
        start = min(times) + 0.6 * (max(times) - min(times))
    return start, start + a.length_us


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="the SYNK_TIMELINE file (or one FILE.<rank> of it)")
    ap.add_argument("out", help="the SVG to write (with --json: the JSON)")
    ap.add_argument("--json", action="store_true", help="write the trace as strict JSON")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--start-us", type=float, help="the window's start, in the trace's ts")
    where.add_argument("--after-us", type=float, help="the window's start after the first event")
    ap.add_argument("--length-us", type=float, default=5000, help="the window's length (5000)")
    ap.add_argument("--rows", default=".", help="a regular expression the row names must match")
    a = ap.parse_args()
    try:
        events = load(a.trace)
        if a.json:
            with open(a.out, "w") as f:
                json.dump(events, f)
            print(f"{a.out}: {len(events)} events")
            return 0
        try:
            rows = re.compile(a.rows)
        except re.error as e:
            raise Unusable(f"--rows {a.rows!r} is not a regular expression: {e}")
        start, end = window(a, events)
        shapes = collect(events, start, end, rows)
        draw(shapes, start, end, a.out)
    except Unusable as e:
        print(f"timeline_svg.py: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"timeline_svg.py: cannot write {a.out}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"{a.out}: {len(shapes)} rows, {sum(map(len, shapes.values()))} shapes, "
          f"{start:.0f}-{end:.0f} us")
    if not shapes:
        print("timeline_svg.py: no row has events in this window (see --start-us, --after-us "
              "and --rows)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
