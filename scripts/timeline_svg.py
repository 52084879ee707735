#!/usr/bin/env python3
"""Draws a window of a SYNK_TIMELINE trace as an SVG picture (no libraries needed).

Usage: scripts/timeline_svg.py TRACE OUT.svg [--start-us T] [--length-us L] [--rows REGEX]

One row per (rank, track) with events in the window: spans ("B"/"E") as boxes, async spans
("b"/"e", such as a key's "queued" wait) as thin bars under their row, points ("i") as ticks.
Without --start-us the window starts at 60% of the trace's time, in steady work.
"""
import argparse
import json
import re
from collections import defaultdict

COLORS = {"running": "#4c78a8", "fused": "#f58518", "queued": "#bab0ac",
          "pushed": "#54a24b", "negotiated": "#b279a2", "done": "#e45756"}


def load(path):
    with open(path) as f:
        text = f.read().rstrip().rstrip(",")
    if not text.endswith("]"):
        text += "]"
    return json.loads(text)


def collect(events, start, end, rows_re):
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    shapes = defaultdict(list)  # (pid, row name) -> [(kind, name, t0, t1)]
    open_spans = defaultdict(list)
    open_async = {}
    for e in sorted((e for e in events if e["ph"] != "M"), key=lambda e: e["ts"]):
        key = (e["pid"], names.get((e["pid"], e.get("tid")), "?"))
        if not re.search(rows_re, key[1]):
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--start-us", type=float)
    ap.add_argument("--length-us", type=float, default=5000)
    ap.add_argument("--rows", default=".", help="a regular expression the row names must match")
    a = ap.parse_args()
    events = load(a.trace)
    times = [e["ts"] for e in events if "ts" in e]
    start = a.start_us if a.start_us is not None else min(times) + 0.6 * (max(times) - min(times))
    shapes = collect(events, start, start + a.length_us, a.rows)
    draw(shapes, start, start + a.length_us, a.out)
    print(f"{a.out}: {len(shapes)} rows, {sum(map(len, shapes.values()))} shapes, "
          f"{start:.0f}-{start + a.length_us:.0f} us")


if __name__ == "__main__":
    main()
