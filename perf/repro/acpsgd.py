#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The ACP-SGD comparison of docs/REPRODUCTION.md, part (f), from
sc_fusion_replay --interleave -J runs whose -p entries are POLICY+MODE (the
dense baseline first, then the compressed modes).

    acpsgd.py [-o FIG.png] [--dpi 80] RUN.json ...

Prints, per run (trace and ranks), Markdown rows of each mode's median
iteration in ms (range) and its communication alone, and the paired
comparisons the targets name, round by round: ACP-SGD against PowerSGD and
against the dense baseline (rounds won, the median of the per-round ratios
T_other / T_acpsgd), and auto against the best of the modes it chooses from
(dense, fp16, topk, acpsgd: the one with the smallest median), as the median of the per-round ratios T_auto / T_best;
with a +powersgd-seq entry (PowerSGD buckets one at a time), the overlapped
PowerSGD against it, the same way.
With -o, one figure: a group of bars per run, a bar per mode (median, the
range as error bar), on a log scale, and the compute alone (dashed).
"""
import json
import os
import statistics
import sys

MODES = [("dense", None), ("powersgd", "+powersgd"), ("powersgd-seq", "+powersgd-seq"),
         ("acpsgd", "+acpsgd"), ("topk", "+topk"), ("fp16", "+fp16"),
         ("auto", "+auto")]
AUTO_CHOOSES = ("dense", "fp16", "topk", "acpsgd")


def mode_of(name):
    for mode, suffix in sorted(MODES[1:], key=lambda m: -len(m[1])):
        if name.endswith(suffix):
            return mode
    return "dense"


def load(path):
    d = json.load(open(path))
    s = d.get("iter_samples_ms") or {}
    runs = {}
    for r in d["results"]:
        m = mode_of(r["policy"])
        if m in runs:
            continue  # the first dense entry is the baseline
        runs[m] = {"policy": r["policy"], "median": r["iter_ms"], "min": r.get("iter_min_ms", r["iter_ms"]),
                   "max": r.get("iter_max_ms", r["iter_ms"]), "comm": r["comm_ms"],
                   "samples": s.get(r["policy"], [])}
    return d, runs


def paired(a, b):
    """(rounds, rounds b was faster, median of a/b per round)."""
    n = min(len(a), len(b))
    if n == 0:
        return 0, 0, float("nan")
    ratios = [a[i] / b[i] for i in range(n)]
    return n, sum(1 for x in ratios if x > 1), statistics.median(ratios)


def label(d):
    trace = os.path.basename(d["trace"]).replace(".trace", "")
    return "%s, %d hosts" % ({"resnet50": "ResNet-50", "bert_base": "BERT-base"}.get(trace, trace),
                             d["ranks"])


def main(argv):
    out, dpi, files = None, 80, []
    i = 0
    while i < len(argv):
        if argv[i] == "-o":
            out = argv[i + 1]
            i += 2
        elif argv[i] == "--dpi":
            dpi = int(argv[i + 1])
            i += 2
        elif argv[i] in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        else:
            files.append(argv[i])
            i += 1
    if not files:
        sys.stderr.write(__doc__.strip() + "\n")
        return 2
    loaded = [load(f) for f in files]
    shown = [(m, x) for m, x in MODES if any(m in runs for _, runs in loaded)]
    print("| run | " + " | ".join(m for m, _ in shown) + " |")
    print("| --- |" + " --- |" * len(shown))
    for d, runs in loaded:
        cells = []
        for m, _ in shown:
            r = runs.get(m)
            cells.append("%.0f (%.0f-%.0f)" % (r["median"], r["min"], r["max"]) if r else "")
        rounds = max(len(r["samples"]) for r in runs.values())
        print("| %s, -T %g, %d rounds | %s |" % (label(d), d["iter_ms_target"], rounds, " | ".join(cells)))
        print("| comm alone | %s |" % " | ".join("%.0f" % runs[m]["comm"] if m in runs else ""
                                                  for m, _ in shown))
    print()
    print("| run | ACP-SGD vs PowerSGD: won, ratio | ACP-SGD vs dense: won, ratio | best of %s | auto / best |"
          % "/".join(AUTO_CHOOSES))
    print("| --- | --- | --- | --- | --- |")
    for d, runs in loaded:
        acp = runs["acpsgd"]["samples"]
        n1, w1, r1 = paired(runs["powersgd"]["samples"], acp) if "powersgd" in runs else (0, 0, float("nan"))
        # A run may leave the slow dense baseline to another run (no pairing then).
        n2, w2, r2 = paired(runs["dense"]["samples"], acp) if "dense" in runs else (0, 0, float("nan"))
        cand = [m for m in AUTO_CHOOSES if m in runs]
        best = min(cand, key=lambda m: runs[m]["median"])
        n3, w3, r3 = paired(runs["auto"]["samples"], runs[best]["samples"]) if "auto" in runs else (0, 0, 0)
        print("| %s | %d of %d, %.2fx | %d of %d, %.2fx | %s | %.2f (auto ahead in %d of %d) |"
              % (label(d), w1, n1, r1, w2, n2, r2, best, r3, n3 - w3, n3))
    seq = [(d, runs) for d, runs in loaded if "powersgd-seq" in runs and "powersgd" in runs]
    if seq:
        print()
        print("| run | PowerSGD overlapped vs one bucket at a time: won, ratio |")
        print("| --- | --- |")
        for d, runs in seq:
            n, w, r = paired(runs["powersgd-seq"]["samples"], runs["powersgd"]["samples"])
            print("| %s | %d of %d, %.2fx |" % (label(d), w, n, r))
    if out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(10, 4.5))
        width = 0.8 / len(MODES)
        for k, (m, _) in enumerate(MODES):
            xs, ys, lo, hi = [], [], [], []
            for g, (d, runs) in enumerate(loaded):
                r = runs.get(m)
                if not r:
                    continue
                xs.append(g + (k - (len(MODES) - 1) / 2) * width)
                ys.append(r["median"])
                lo.append(r["median"] - r["min"])
                hi.append(r["max"] - r["median"])
            name = m
            if m == "dense":
                pol = [runs["dense"]["policy"] for _, runs in loaded if "dense" in runs]
                name = "dense (%s)" % pol[0].split("+")[0] if pol else m
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=name)
        for g, (d, _) in enumerate(loaded):
            ax.hlines(d["compute_ms"], g - 0.42, g + 0.42, colors="k", linestyles="--",
                      label="compute alone" if g == 0 else None)
        ax.set_xticks(range(len(loaded)))
        ax.set_xticklabels(["%s\n-T %g" % (label(d), d["iter_ms_target"]) for d, _ in loaded])
        ax.set_yscale("log")
        ax.set_ylabel("iteration (ms), median and range")
        ax.set_title("S-SGD vs PowerSGD vs ACP-SGD (rank 4) vs top-k, 1 Gbit/s bed")
        ax.legend(fontsize=8, ncol=3)
        fig.tight_layout()
        fig.savefig(out, dpi=dpi)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
