#!/usr/bin/env python3
"""Issue 34's targets, read off synk-bench --json files; prints markdown for gpu-check's summary.

  gpu_check_verdict.py nccl FILE...  synk's nccl rows against raw NCCL (--baseline nccl): within
                                     2% from 1 MiB up, at most 3 us more per call below
  gpu_check_verdict.py shm FILE...   shm against Open MPI, per collective and rank count (a
                                     file per table, named ...-RANKS.json): the
                                     lowest speedup from 64 KiB and overall (all_reduce on 8 and
                                     16 ranks: >= 1.5x from 64 KiB, >= 1.0x everywhere)
Files that are missing or empty (a step that failed) are named and skipped.
"""
import json
import re
import statistics
import sys

SMALL_LIMIT_US = 3.0
LARGE_LIMIT = 0.02
LARGE_FROM = 1 << 20


def verdict(rows):
    small = [r for r in rows if r["bytes"] < LARGE_FROM]
    large = [r for r in rows if r["bytes"] >= LARGE_FROM]
    extra_us = [r["time_us"] - r["nccl_time_us"] for r in small]
    extra_rel = [r["time_us"] / r["nccl_time_us"] - 1 for r in large]
    met = sum(e <= SMALL_LIMIT_US for e in extra_us) + sum(e <= LARGE_LIMIT for e in extra_rel)
    worst_small = max(zip(extra_us, small), key=lambda p: p[0], default=None)
    worst_large = max(zip(extra_rel, large), key=lambda p: p[0], default=None)
    return met, extra_us, extra_rel, worst_small, worst_large


def load(files):
    rows = []
    for f in files:
        try:
            rows += [dict(r, file=f) for r in json.load(open(f))]
        except (OSError, ValueError) as e:
            print(f"    ({f}: {e})")
    return rows


def shm_report(files):
    rows = [r for r in load(files) if r.get("mpi_time_us") and r.get("speedup")]
    if not rows:
        print("    (no shm rows with an MPI time)")
        return 1
    print("")
    print("| coll | ranks | rows | lowest speedup | lowest from 64 KiB | geomean |")
    print("|---|---|---|---|---|---|")
    for f in dict.fromkeys(r["file"] for r in rows):
        mine = [r for r in rows if r["file"] == f]
        ranks = re.search(r"-(\d+)\.json$", f)  # gpu-check names them COLL-RANKS.json
        ranks = ranks.group(1) if ranks else "?"
        low = min(mine, key=lambda r: r["speedup"])
        big = [r for r in mine if r["bytes"] >= 64 << 10]
        low_big = min(big, key=lambda r: r["speedup"]) if big else None
        geo = statistics.geometric_mean(r["speedup"] for r in mine)
        lb = f"{low_big['speedup']:.2f} at {low_big['bytes']} B" if low_big else "-"
        print(f"| {mine[0]['coll']} | {ranks} | {len(mine)} | {low['speedup']:.2f} at "
              f"{low['bytes']} B | {lb} | {geo:.2f} |")
    return 0


def nccl_report(files):
    rows = [r for r in load(files) if r.get("nccl_time_us")]
    if not rows:
        print("    (no nccl rows with a raw NCCL time)")
        return 1
    print("")
    print("| coll | rows meeting the target | median extra < 1 MiB | worst < 1 MiB "
          "| median extra >= 1 MiB | worst >= 1 MiB |")
    print("|---|---|---|---|---|---|")
    failed = 0
    for coll in dict.fromkeys(r["coll"] for r in rows):
        mine = [r for r in rows if r["coll"] == coll]
        met, extra_us, extra_rel, ws, wl = verdict(mine)
        failed += len(mine) - met
        med_s = f"{statistics.median(extra_us):+.2f} us" if extra_us else "-"
        med_l = f"{100 * statistics.median(extra_rel):+.2f}%" if extra_rel else "-"
        worst_s = f"{ws[0]:+.2f} us at {ws[1]['bytes']} B" if ws else "-"
        worst_l = f"{100 * wl[0]:+.2f}% at {wl[1]['bytes']} B" if wl else "-"
        print(f"| {coll} | {met}/{len(mine)} | {med_s} | {worst_s} | {med_l} | {worst_l} |")
    print("")
    print(f"- target (<= {SMALL_LIMIT_US} us more below 1 MiB, <= {100 * LARGE_LIMIT:.0f}% "
          f"from 1 MiB): {'met by every row' if not failed else f'missed by {failed} rows'}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("nccl", "shm"):
        sys.exit(__doc__)
    report = nccl_report if sys.argv[1] == "nccl" else shm_report
    sys.exit(report(sys.argv[2:]))
