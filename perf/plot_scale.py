#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The growth curves of perf/scale.sh: one figure of four panels against the
rank count P (log2 axis), a line per library and transport.

    plot_scale.py [-o FILE] [--dpi N] [--rss-from CSV] [--extra FILE.jsonl] SCALE.csv...

Panels: communicator creation (slowest rank, s), the first 1 MiB all-reduce
(slowest rank, s), peak RSS per rank (VmHWM of the largest rank, MiB) and rank
0's descriptors after the calls. Several CSV files are merged; where two give
the same (library, transport, connect, P), the later file's row wins; a job
that failed or ran out of time (a row without values) is left out.
--rss-from takes our rows' peak RSS (only that column) from another scale.csv,
for a table whose memory was measured in a later run than its times.
--extra adds the peak RSS and descriptors of a sc_scale_probe job run outside
scale.sh (one JSON line per rank, as `sc-run -n P sc_scale_probe` prints over tcp)
to the tcp line; its times are left out (another machine load). Prints one
line per series."""
import argparse
import csv
import json
import sys


def load(paths):
    rows = {}
    for p in paths:
        with open(p, newline="") as f:
            for r in csv.DictReader(f):
                rows[(r["lib"], r["transport"], r["connect"], int(r["nranks"]))] = r
    return rows


def probe_point(path):
    """(P, no time, no time, peak RSS MiB max, rank 0's fds) from one JSON line
    per rank of sc_scale_probe."""
    lines = [json.loads(line) for line in open(path) if line.startswith("{")]
    if not lines:
        sys.exit("plot_scale.py: no JSON lines in %s" % path)
    r0 = [x for x in lines if x.get("rank") == 0]
    fds0 = r0[0]["fds"] if r0 else max(x["fds"] for x in lines)
    return (len(lines), float("nan"), float("nan"), max(x["hwm_kb"] for x in lines) / 1024.0, fds0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("-o", default="scale_growth.png")
    ap.add_argument("--dpi", type=int, default=110)
    ap.add_argument("--rss-from", help="scale.csv whose peak RSS replaces our rows'")
    ap.add_argument("--extra", help="sc_scale_probe JSON lines of a tcp job outside scale.sh")
    a = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = load(a.csv)
    if a.rss_from:
        for k, r in load([a.rss_from]).items():
            if k in rows and k[0] == "sc":
                rows[k]["hwm_mib_max"] = r["hwm_mib_max"]
    series = {}
    for (lib, tp, conn, p), r in sorted(rows.items(), key=lambda kv: kv[0][3]):
        if r["init_s_max"] == "":
            continue  # the job failed or ran out of time: its row has no values
        name = ("ours" if lib == "sc" else "Open MPI") + ", " + tp + ("" if lib != "sc" else ", " + conn)
        series.setdefault(name, []).append(
            (p, float(r["init_s_max"]), float(r["ar1m_s_max"]), float(r["hwm_mib_max"]), int(r["fds_rank0"])))
    if a.extra:
        pt = probe_point(a.extra)
        key = [k for k in series if k.startswith("ours, tcp")]
        series.setdefault(key[0] if key else "ours, tcp", []).append(pt)
    panels = [("communicator creation, slowest rank (s)", 1, True),
              ("first 1 MiB all-reduce, slowest rank (s)", 2, True),
              ("peak RSS per rank, largest (MiB)", 3, False),
              ("rank 0's descriptors", 4, False)]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, (title, col, logy) in zip(axes.flat, panels):
        for name, pts in sorted(series.items()):
            pts = sorted(pts)
            pts = [x for x in pts if x[col] == x[col]]  # NaN: not measured
            ax.plot([x[0] for x in pts], [x[col] for x in pts], marker="o",
                    linestyle="--" if name.startswith("Open MPI") else "-", label=name)
        ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("ranks on one host (P)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.o, dpi=a.dpi)
    for name, pts in sorted(series.items()):
        pts = sorted(pts)
        print("%-22s P %s: creation %s s, 1 MiB %s s, RSS %s MiB, fds %s" % (
            name, ",".join(str(x[0]) for x in pts), ",".join("%.2f" % x[1] for x in pts),
            ",".join("%.2f" % x[2] for x in pts), ",".join("%.1f" % x[3] for x in pts),
            ",".join(str(x[4]) for x in pts)))
    print("wrote", a.o)


if __name__ == "__main__":
    main()
