#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Figures of docs/REPRODUCTION.md's 1-bit, MSTopK and K-FAC sections, from
the JSON of perf/repro/repro.sh.

    plot_compress.py [-o DIR] [--dpi N] RUNDIR

Reads from RUNDIR whatever it finds of:
  onebit_P<P>.json   sc_onebit_perf -J, one per rank count
                     -> onebit_vs_nranks.png (time per call and bytes sent
                        per rank against P, one line per row)
  select_<dist>.json sc_gtopk_perf --select -J
  hitopk_<algo>.json sc_fusion_replay -J, single gTop-k over a model with
                     SC_GTOPK_ALGO=<algo>
                     -> mstopk.png (selection times per distribution, with
                        MSTopK's overlap; communication time per algorithm)
  kfac_P<P>.json     sc_kfac_perf -J, one per rank count
                     -> kfac_traffic.png (step time per scheme, split into
                        the reduction and the broadcast phase)
Prints the numbers each figure shows.
"""
import argparse
import glob
import json
import os
import re
import sys


# ms per MB on the bed's 1 Gbit/s links: 8.37 ns/B (0.956 x 125 MB/s, one TCP
# stream's payload rate; docs/REPRODUCTION.md, (a)).
WIRE_MS_PER_MB = 8.37


def load(path):
    with open(path) as f:
        return json.load(f)


def by_suffix(rundir, prefix):
    """{key: json} for RUNDIR/<prefix><key>.json."""
    out = {}
    for path in sorted(glob.glob(os.path.join(rundir, prefix + "*.json"))):
        key = os.path.basename(path)[len(prefix) : -len(".json")]
        try:
            out[key] = load(path)
        except (OSError, ValueError) as e:
            print(f"plot_compress.py: skipping {path}: {e}", file=sys.stderr)
    return out


def plot_onebit(plt, runs, outdir, dpi):
    ps = sorted(int(k) for k in runs if re.fullmatch(r"\d+", k))
    if not ps:
        return
    names = []
    for p in ps:
        for r in runs[str(p)]["rows"]:
            if r["algo"] not in names:
                names.append(r["algo"])
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(10, 4))
    n = runs[str(ps[0])]["n"]
    print(f"1-bit vs dense vs all-gather of signs, n = {n} float32: time ms / sent MB per rank")
    for name in names:
        xs, ts, bs = [], [], []
        for p in ps:
            row = [r for r in runs[str(p)]["rows"] if r["algo"] == name]
            if row:
                xs.append(p)
                ts.append(row[0]["time_us"] / 1e3)
                bs.append(row[0]["sent_bytes_max"] / 1e6)
        line = ax_t.plot(xs, ts, marker="o", label=name)[0]
        # The wire alone: the bytes at one TCP stream's payload rate of 1 Gbit/s.
        ax_t.plot(xs, [b * WIRE_MS_PER_MB for b in bs], "--", color=line.get_color(), alpha=0.6)
        ax_b.plot(xs, bs, marker="o", label=name)
        print(
            f"  {name:10s} "
            + "  ".join(f"P={p}: {t:.1f} / {b:.2f}" for p, t, b in zip(xs, ts, bs))
        )
    ax_t.set_xlabel("ranks (one per 1 Gbit/s host)")
    ax_t.set_ylabel("time per call, ms (median, slowest rank)\ndashed: the bytes' wire time")
    ax_t.set_yscale("log")
    ax_b.set_xlabel("ranks (one per 1 Gbit/s host)")
    ax_b.set_ylabel("bytes sent per rank per call, MB")
    ax_b.set_yscale("log")
    for ax in (ax_t, ax_b):
        ax.set_xticks(ps)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(f"1-bit all-reduce vs dense ring vs all-gather of signs, {n * 4 / 2**20:.0f} MiB float32")
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "onebit_vs_nranks.png"), dpi=dpi)
    plt.close(fig)


def plot_mstopk(plt, sel, hi, outdir, dpi):
    if not sel and not hi:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    ax = axes[0]
    if sel:
        dists = sorted(sel)
        width = 0.27
        n = sel[dists[0]]["n"]
        print(f"selection, n = {n}: exact / gaussian / mstopk ms, MSTopK overlap")
        for i, (key, label) in enumerate(
            [("exact_ms", "exact"), ("gaussian_ms", "Gaussian"), ("mstopk_ms", "MSTopK")]
        ):
            vals = [sel[d].get(key) or 0 for d in dists]
            bars = ax.bar([j + (i - 1) * width for j in range(len(dists))], vals, width, label=label)
            if key == "mstopk_ms":
                for b, d in zip(bars, dists):
                    ax.annotate(
                        f"overlap {sel[d]['mstopk_overlap']:.3f}",
                        (b.get_x() + b.get_width() / 2, b.get_height()),
                        ha="center",
                        va="bottom",
                        fontsize=8,
                    )
        for d in dists:
            s = sel[d]
            print(
                f"  {d:8s} {s['exact_ms']:.1f} / {s['gaussian_ms']:.1f} / {s['mstopk_ms']:.1f}, "
                f"MSTopK {s['mstopk_speedup']:.2f}x exact, overlap {s['mstopk_overlap']:.4f}, "
                f"Gaussian count/k {s['count_over_k']:.3f}"
            )
        ax.set_xticks(range(len(dists)))
        ax.set_xticklabels(dists)
        ax.set_ylabel("ms per selection (median, one core)")
        ax.set_title(f"top-k selection, n = {n / 2**20:.0f} x 2^20, k = {sel[dists[0]]['k']}")
        ax.legend()
    ax = axes[1]
    if hi:
        order = [a for a in ("gtopk", "hier", "hitopk") if a in hi] + sorted(
            a for a in hi if a not in ("gtopk", "hier", "hitopk")
        )
        vals, iters, labels = [], [], []
        for a in order:
            r = hi[a]["results"][0]
            vals.append(r["comm_ms"])
            iters.append(r["iter_ms"])
            labels.append(a)
        ax.bar(labels, vals, color="tab:purple")
        for x, v in enumerate(vals):
            ax.annotate(f"{v:.0f}", (x, v), ha="center", va="bottom", fontsize=9)
        h = hi[order[0]]
        ax.set_ylabel("ms per sc_gtopk_allreduce (comm alone)")
        ax.set_title(
            f"single gTop-k over {h['trace']} ({h['params'] / 1e6:.1f}M), density {h['density']:g},\n"
            f"{h['ranks']} ranks = 4 hosts x 2"
        )
        print("single gTop-k over the model, 4 x 2: comm ms / iter ms")
        for a, v, it in zip(labels, vals, iters):
            print(f"  {a:8s} {v:.1f} / {it:.1f}")
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "mstopk.png"), dpi=dpi)
    plt.close(fig)


def plot_kfac(plt, runs, outdir, dpi):
    ps = sorted(int(k) for k in runs if re.fullmatch(r"\d+", k))
    if not ps:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.38
    r0 = runs[str(ps[0])]
    print(
        f"K-FAC factor traffic, {r0['model']} ({r0['factors']} factors, "
        f"{r0['factor_bytes_full'] / 2**20:.0f} MiB full): step s (reduce + broadcast)"
    )
    for i, scheme in enumerate(("full", "packed")):
        xs, red, bc = [], [], []
        for j, p in enumerate(ps):
            row = [r for r in runs[str(p)]["rows"] if r["algo"] == scheme]
            if not row:
                continue
            xs.append(j + (i - 0.5) * width)
            red.append(row[0]["reduce_us"] / 1e6)
            bc.append(row[0]["broadcast_us"] / 1e6)
            print(
                f"  P={p} {scheme:6s} {row[0]['time_us'] / 1e6:.2f} "
                f"({red[-1]:.2f} + {bc[-1]:.2f}), sent {row[0]['sent_bytes_max'] / 1e6:.0f} MB max"
            )
        lbl = "all-reduce + broadcast" if scheme == "full" else "reduce_sym + broadcast_sym"
        ax.bar(xs, red, width, label=f"{scheme}: {lbl.split(' + ')[0]}", color=f"C{2 * i}")
        ax.bar(xs, bc, width, bottom=red, label=f"{scheme}: {lbl.split(' + ')[1]}", color=f"C{2 * i + 1}")
    ax.set_xticks(range(len(ps)))
    ax.set_xticklabels([f"{p} hosts" for p in ps])
    ax.set_ylabel("s per step (median, slowest rank)")
    ax.set_title(f"K-FAC factor traffic, {r0['model']}, 1 Gbit/s")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "kfac_traffic.png"), dpi=dpi)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rundir")
    ap.add_argument("-o", "--outdir", default="fig")
    ap.add_argument("--dpi", type=int, default=80)
    a = ap.parse_args()
    onebit = by_suffix(a.rundir, "onebit_P")
    sel = by_suffix(a.rundir, "select_")
    hi = by_suffix(a.rundir, "hitopk_")
    kfac = by_suffix(a.rundir, "kfac_P")
    if not (onebit or sel or hi or kfac):
        return 0
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(a.outdir, exist_ok=True)
    plot_onebit(plt, onebit, a.outdir, a.dpi)
    plot_mstopk(plt, sel, hi, a.outdir, a.dpi)
    plot_kfac(plt, kfac, a.outdir, a.dpi)
    return 0


if __name__ == "__main__":
    sys.exit(main())
