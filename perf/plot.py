#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Figures from the JSON the perf tools write (see perf/README.md).

    plot.py [-o DIR] [--link RATE] [--kind KIND] [--model M] [--dpi N] FILE...

Each input is recognised by its shape (or forced with --kind):
  dense    sc_*_perf -J: busbw vs size, one line per file (out of place;
           in place dashed when it differs).
  compare  sc_allreduce_perf -a compare -J: busbw vs size per algorithm.
  peers    perf/compare/allreduce_compare.sh -J: busbw vs size per library.
  sparse   one file per nranks with rows naming an algorithm and a time
           (sc_gtopk_perf): time vs nranks per algorithm (several files with
           the same nranks: their median); for sc_gtopk_perf files also the
           alpha-beta model of docs/ALGORITHMS.md per algorithm (dashed), see
           --model and --duplex.
  bars     {"title", "ylabel", "bars": [{"label", "value"}, ...]} or any rows
           of one label and one number (fusion replay): a bar per label, with
           error bars from "error" or the samples' range (iter_min_ms and
           iter_max_ms of sc_fusion_replay -J; files without them: no bars).
dense, compare and peers files go into busbw_P<nranks>.png (one figure per
rank count, every file's lines together, so libraries and algorithms measured
in one run are compared on one plot); sparse files into time_vs_nranks.png;
each bars file into bars_<name>.png. --link RATE (e.g. 1gbit, 100mbit) draws
the link rate, which is ring all-reduce's busbw limit, and 0.956 of it, what
one TCP stream carries on the emulated cluster. Prints one line per series.

--model for the sparse figure: "link" (the default with --link) takes beta
from the link rate (1 / (0.956 x RATE / 8) s per byte, one TCP stream's
payload rate) and alpha from the 8-byte all-reduce latency sc_gtopk_perf
measures (its time / the message steps of the algorithm that ran it, median
over the files); "fit" (the default without --link) fits alpha and beta by
least squares to every measured point; "none" draws no model. --duplex full
(the default) charges a sparse exchange one direction's bytes (L (alpha +
k(4+w) beta) for the butterfly, 2 ceil(log2 P)(alpha + k(4+w) beta) for the
tree, (P-1)(alpha + k(4+w) beta) for the library's ring all-gather), as the
papers do, as the dense ring formula does and as docs/ALGORITHMS.md's table
does: links are full duplex. --duplex half charges a rank's sent and received
sparse bytes both (the table's earlier terms, kept to redraw old figures).
"""
import argparse
import json
import math
import os
import re
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    # Debian's python3-matplotlib lives in /usr/bin/python3, which may not be
    # the python3 first on PATH (pyenv, venvs).
    if os.path.exists("/usr/bin/python3") and sys.executable != "/usr/bin/python3" \
            and not os.environ.get("SC_PLOT_REEXEC"):
        os.environ["SC_PLOT_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("plot.py: matplotlib is missing (apt-get install -y python3-matplotlib)")

ONE_STREAM = 0.956  # payload share of one TCP stream under tbf (docs/BENCHMARKING.md)
NAME_KEYS = ("algo", "algorithm", "name", "library", "label", "policy")
# The bar's value when a row has several numbers (fusion replay: iter_ms).
VALUE_KEYS = ("value", "iter_ms", "time_ms", "median_ms", "time_us")
TIME_KEYS = ("time_us", "median_us", "time_median_us", "med_us", "time_ms", "median_ms",
             "time_s", "time")


def bus_factor(collective, p):
    """busbw = algbw x this (docs/BENCHMARKING.md)."""
    if p <= 1:
        return 1.0
    c = (collective or "allreduce").replace("_", "").replace("-", "").lower()
    if c == "allreduce":
        return 2.0 * (p - 1) / p
    if c in ("reducescatter", "allgather"):
        return (p - 1) / p
    return 1.0


def parse_rate(text):
    """'1gbit', '100mbit', '10g' -> bits per second."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kmgt]?)(bit|b|bps)?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError("rate '%s' not understood (e.g. 1gbit)" % text)
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    return float(m.group(1)) * scale


def kind_of(d):
    if not isinstance(d, dict):
        return None
    if d.get("benchmark") == "allreduce_compare" and isinstance(d.get("results"), list):
        return "peers"
    if d.get("mode") == "compare" and isinstance(d.get("rows"), list):
        return "compare"
    rows = d.get("rows")
    if isinstance(rows, list) and rows and isinstance(rows[0], dict) and "out_of_place" in rows[0]:
        return "dense"
    if isinstance(d.get("bars"), list):
        return "bars"
    if sparse_rows(d):
        return "sparse"
    if label_value_rows(d):
        return "bars"
    return None


def first_list_of_dicts(d):
    for key in ("rows", "results", "algorithms", "runs", "data"):
        v = d.get(key)
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            return v
    return None


def time_in_us(row):
    for k in TIME_KEYS:
        v = row.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if k.endswith("_ms"):
                return v * 1e3
            if k.endswith("_s"):
                return v * 1e6
            return v  # _us, and a bare "time" is taken as microseconds
    return None


def nranks_of(d):
    for k in ("nranks", "world_size", "ranks"):
        if isinstance(d.get(k), int) and not isinstance(d.get(k), bool):
            return d[k]
    return None


def sparse_rows(d):
    """(name, time_us, row) for each row naming an algorithm with a time."""
    rows = first_list_of_dicts(d)
    if not rows or nranks_of(d) is None:
        return None
    out = []
    for r in rows:
        name = next((r[k] for k in NAME_KEYS if isinstance(r.get(k), str)), None)
        t = time_in_us(r)
        if name is None or t is None:
            return None
        out.append((name, t, r))
    return out


def range_error(r, key, val):
    """A bar's error: "error" (symmetric), else the samples' range around the
    value, (below, above), from <name>_min_<unit>/<name>_max_<unit> (fusion
    replay: iter_min_ms, iter_max_ms) or min/max; None without either."""
    if isinstance(r.get("error"), (int, float)):
        return r["error"]
    m = re.match(r"(.*)_(ms|us)$", key or "")
    lo_k, hi_k = ("%s_min_%s" % m.groups(), "%s_max_%s" % m.groups()) if m else ("min", "max")
    lo, hi = r.get(lo_k), r.get(hi_k)
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo <= val <= hi:
        return (val - lo, hi - val)
    return None


def label_value_rows(d):
    """[(label, value)] from {"bars": [...]}, rows of one label and one number, or {label: number}."""
    rows = d.get("bars") if isinstance(d.get("bars"), list) else first_list_of_dicts(d)
    out = []
    if rows:
        for r in rows:
            if not isinstance(r, dict):
                return None
            label = next((r[k] for k in NAME_KEYS if isinstance(r.get(k), str)), None)
            key = next((k for k in VALUE_KEYS if isinstance(r.get(k), (int, float))), None)
            if key:
                val = r[key]
            else:
                nums = [v for k, v in r.items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)]
                val = nums[0] if len(nums) == 1 else None
            if label is None or not isinstance(val, (int, float)):
                return None
            out.append((label, float(val), range_error(r, key, val)))
        return out
    if d and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in d.values()):
        return [(k, float(v), None) for k, v in d.items()]
    return None


def series_from(d, kind, path):
    """[(nranks, label, [(size, busbw_GBps)], style)] for the busbw plots."""
    out = []
    base = os.path.splitext(os.path.basename(path))[0]
    if kind == "dense":
        p = d.get("nranks", 0)
        algo = (d.get("algo") or {}).get("value", "")
        name = "%s %s" % (d.get("binary", base).replace("sc_", "").replace("_perf", ""),
                          algo)
        pts = {}
        for place in ("out_of_place", "in_place"):
            pts[place] = [(r["size"], r[place]["busbw_GBps"]) for r in d["rows"]
                          if r.get(place) and r[place].get("time_us", 0) > 0 and r["size"] > 0]
        out.append((p, name.strip(), pts["out_of_place"], "-"))
        oop = dict(pts["out_of_place"])
        # In place only when it tells something: more than 5% off somewhere.
        if any(abs(b - oop.get(s, -1)) > 0.05 * max(b, 1e-12) for s, b in pts["in_place"]):
            out.append((p, name.strip() + " (in place)", pts["in_place"], "--"))
    elif kind == "compare":
        p = d.get("nranks", 0)
        f = bus_factor(d.get("collective"), p)
        for a in d.get("algorithms", []):
            pts = [(r["size"], r["size"] / (r["time_us"][a] * 1e3) * f) for r in d["rows"]
                   if r["time_us"].get(a) and r["size"] > 0]
            out.append((p, a, pts, "-"))
    elif kind == "peers":
        groups = {}
        for r in d["results"]:
            if r.get("busbw_gbs") is None:
                continue
            groups.setdefault((r["nranks"], r["library"]), []).append((r["bytes"], r["busbw_gbs"]))
        for (p, lib), pts in groups.items():
            out.append((p, lib, sorted(pts), "-"))
    return out


def human_size(b):
    for unit, s in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= s:
            v = b / s
            return ("%d%s" % (v, unit)) if v == int(v) else ("%.1f%s" % (v, unit))
    return "%d" % b


def link_lines(ax, link_bps):
    if not link_bps:
        return
    gbs = link_bps / 8e9
    ax.axhline(gbs, color="black", lw=1, ls=":", label="link rate (ring all-reduce limit)")
    ax.axhline(gbs * ONE_STREAM, color="gray", lw=1, ls="-.",
               label="%.3f x link (one TCP stream)" % ONE_STREAM)


def plot_busbw(series, outdir, link_bps, title, dpi=120):
    written = []
    for p in sorted({s[0] for s in series}):
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        sizes = set()
        for sp, label, pts, style in series:
            if sp != p or not pts:
                continue
            pts = sorted(pts)
            sizes.update(s for s, _ in pts)
            ax.plot([s for s, _ in pts], [b for _, b in pts], style, marker="o", ms=3, label=label)
            peak = max(pts, key=lambda x: x[1])
            frac = (" = %.3f of the link" % (peak[1] * 8e9 / link_bps)) if link_bps else ""
            print("busbw P=%d %s: %d sizes, peak %.4g GB/s at %s%s"
                  % (p, label, len(pts), peak[1], human_size(peak[0]), frac))
        link_lines(ax, link_bps)
        ax.set_xscale("log", base=2)
        ticks = sorted(sizes)
        if ticks:
            step = max(1, math.ceil(len(ticks) / 12))
            ax.set_xticks(ticks[::step])
            ax.set_xticklabels([human_size(t) for t in ticks[::step]], rotation=45)
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s, 1e9 B)")
        ax.set_ylim(bottom=0)
        ax.set_title(title or "bus bandwidth vs size, %d ranks" % p)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(outdir, "busbw_P%d.png" % p)
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
        written.append(path)
    return written


def log2_steps(p):
    """Steps of a butterfly over p ranks: log2 p, +2 to fold the excess when p is
    not a power of two (docs/ALGORITHMS.md, recursive doubling)."""
    lo = int(math.floor(math.log2(p))) if p > 1 else 0
    return lo + (0 if (1 << lo) == p else 2)


def ceil_log2(p):
    return int(math.ceil(math.log2(p))) if p > 1 else 0


# Message steps of each dense algorithm (docs/ALGORITHMS.md), to turn a
# measured small-message time into alpha.
def dense_steps(algo, p):
    if algo == "ring":
        return 2 * (p - 1)
    if algo in ("tree", "rabenseifner"):
        return 2 * log2_steps(p)
    return log2_steps(p)  # rd and anything unknown


def model_terms(algo, p, d, full_duplex=True):
    """(alpha coefficient, beta coefficient in bytes) of docs/ALGORITHMS.md's
    cost for this algorithm, P ranks, the run's n, k and value width w;
    full_duplex False: the doubled sparse terms of --duplex half (below)."""
    n, k, w = d["n"], d["k"], d.get("dtype_bytes", 4)
    e = k * (d.get("index_bytes", 4) + w)  # one sparse entry set
    if algo == "dense":  # ring
        return 2 * (p - 1), 2.0 * (p - 1) / p * n * w
    if full_duplex:
        # Each sc-netbed veth is shaped both ways, as a switched Ethernet port
        # is, so an exchange in which a rank sends one set and receives one
        # costs one set's bytes, as a ring step costs one chunk: the papers'
        # formulas (their 2k words are k entries of index + value). A 2-rank
        # exchange on the bed takes this single charge, and a 2-rank dense ring,
        # which sends and receives n bytes each, takes n beta (docs/REPRODUCTION.md).
        if algo == "gtopk":  # butterfly: L (alpha + k(4+w) beta), +2 fold steps
            s = log2_steps(p)
            return s, e * s
        if algo == "tree":  # reduce + broadcast: 2 ceil(log2P)(alpha + k(4+w) beta)
            s = ceil_log2(p)
            return 2 * s, 2.0 * e * s
        if algo == "allgather":  # this library's ring: (P-1)(alpha + k(4+w) beta)
            return p - 1, (p - 1) * e
        return None
    # --duplex half: a rank's sent and received bytes both.
    if algo == "gtopk":  # butterfly: log2P (alpha + 2k(4+w) beta)
        s = log2_steps(p)
        return s, 2.0 * e * s
    if algo == "tree":  # 2 log2P alpha + 4k log2P (4+w) beta
        s = ceil_log2(p)
        return 2 * s, 4.0 * e * s
    if algo == "allgather":  # log2P alpha + (P-1)k(4+w) beta
        return ceil_log2(p), (p - 1) * e
    return None


def merge_entries(algo, p, d):
    """Input entries of the Merge(A, B) calls on a rank's critical path, which
    the alpha-beta terms leave out: the butterfly merges two k-sets per
    exchange, floor(log2 P) of them plus one for the folded rank's set when P
    is not a power of two; the tree's root merges ceil(log2 P) times. None for
    the rest (the all-gather's sum and the dense ring's reductions are another
    kernel, not measured)."""
    k = d["k"]
    if algo == "gtopk":
        lo = int(math.floor(math.log2(p))) if p > 1 else 0
        return 2 * k * (lo + (0 if (1 << lo) == p else 1))
    if algo == "tree":
        return 2 * k * ceil_log2(p)
    return None


def local_us(algo, p, d, cores=0):
    """Merge time in us on the critical path: merge_entries times the rate
    sc_gtopk_perf measured for one merge on one core (merge_ns_per_entry);
    with cores > 0, times max(1, P / cores) for P ranks merging at once on
    that many cores. 0 when the run has no measured rate."""
    e = merge_entries(algo, p, d)
    ns = d.get("merge_ns_per_entry")
    if e is None or not isinstance(ns, (int, float)) or ns <= 0:
        return 0.0
    share = max(1.0, p / cores) if cores > 0 else 1.0
    return e * ns * 1e-3 * share


def fit_alpha_beta(samples):
    """Least squares t = a*A + b*B over (A, B, t) with a, b >= 0 (2x2 normal equations)."""
    saa = sum(a * a for a, _, _ in samples)
    sbb = sum(b * b for _, b, _ in samples)
    sab = sum(a * b for a, b, _ in samples)
    sat = sum(a * t for a, _, t in samples)
    sbt = sum(b * t for _, b, t in samples)
    det = saa * sbb - sab * sab
    if det > 0:
        a = (sat * sbb - sbt * sab) / det
        b = (saa * sbt - sab * sat) / det
        if a >= 0 and b >= 0:
            return a, b
    # One of them pinned at 0: the better of the two one-parameter fits.
    cands = []
    if sbb > 0:
        b = max(sbt / sbb, 0.0)
        cands.append((sum((t - b * B) ** 2 for _, B, t in samples), 0.0, b))
    if saa > 0:
        a = max(sat / saa, 0.0)
        cands.append((sum((t - a * A) ** 2 for A, _, t in samples), a, 0.0))
    return min(cands)[1:] if cands else (0.0, 0.0)


def sparse_model(docs, by_algo, mode, link_bps, full_duplex=True, local=False, cores=0):
    """{algo: [(P, model time in us)]} and a description of alpha and beta;
    local adds local_us (the measured merge work) to the gTop-k lines."""
    docs = [d for d in docs if d.get("benchmark") == "sc_gtopk_perf" and "n" in d and "k" in d]
    if mode == "none" or not docs:
        return {}, None
    if mode == "link" and not link_bps:
        sys.exit("plot.py: --model link needs --link RATE")
    if mode == "link":
        alphas = sorted(d["latency_8B_allreduce_us"] * 1e-6 /
                        max(1, dense_steps(d.get("latency_algo", "rd"), d["nranks"]))
                        for d in docs if isinstance(d.get("latency_8B_allreduce_us"), (int, float)))
        alpha = alphas[len(alphas) // 2] if alphas else 0.0
        beta = 8.0 / (ONE_STREAM * link_bps)
        how = ("alpha %.1f us (8-byte all-reduce latency per step), beta from %.3g Gbit/s x %.3f"
               % (alpha * 1e6, link_bps / 1e9, ONE_STREAM))
    else:
        samples = []
        for d in docs:
            p = nranks_of(d)
            for name, t, _ in sparse_rows(d):
                terms = model_terms(name, p, d, full_duplex)
                if terms:
                    # Relative error, so the dense ring's seconds do not drown
                    # the sparse algorithms' milliseconds.
                    samples.append((terms[0] / t, terms[1] / t, 1.0))
        alpha, beta = fit_alpha_beta(samples)
        alpha *= 1e-6
        beta *= 1e-6
        how = ("alpha %.1f us, beta %.3g ns/B (= %.3g Gbit/s) fitted to all points"
               % (alpha * 1e6, beta * 1e9, 8e-9 / beta if beta else float("inf")))
    ref = dict(docs[0])
    rates = sorted(d["merge_ns_per_entry"] for d in docs
                   if isinstance(d.get("merge_ns_per_entry"), (int, float)))
    if rates:  # one rate for every P: the median over the files
        ref["merge_ns_per_entry"] = rates[len(rates) // 2]
    if local:
        how += ("; + measured merge work, %.2f ns per entry%s" %
                (ref.get("merge_ns_per_entry") or 0.0,
                 ", x max(1, P/%d) for %d cores" % (cores, cores) if cores else ""))
    ranks = sorted({p for pts in by_algo.values() for p, _ in pts})
    out = {}
    for name in by_algo:
        pts = []
        for p in range(min(ranks), max(ranks) + 1):
            terms = model_terms(name, p, ref, full_duplex)
            if terms:
                t = (terms[0] * alpha + terms[1] * beta) * 1e6
                if local:
                    t += local_us(name, p, ref, cores)
                pts.append((p, t))
        if pts:
            out[name] = pts
    return out, how


def median(xs):
    xs = sorted(xs)
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else 0.5 * (xs[m - 1] + xs[m])


def plot_sparse(docs, outdir, title, mode=None, link_bps=None, dpi=120, full_duplex=True,
                local=False, cores=0):
    # Several files with the same nranks are repeated runs: one point, their median.
    runs = {}
    for d in docs:
        for name, t, _ in sparse_rows(d):
            runs.setdefault(name, {}).setdefault(nranks_of(d), []).append(t)
    by_algo = {name: [(p, median(ts)) for p, ts in per_p.items()]
               for name, per_p in runs.items()}
    nrep = max(len(ts) for per_p in runs.values() for ts in per_p.values())
    if nrep > 1:
        print("points: median of up to %d runs per rank count" % nrep)
    mode = mode or ("link" if link_bps else "fit")
    model, how = sparse_model(docs, by_algo, mode, link_bps, full_duplex, local, cores)
    if how and not full_duplex:
        how += "; half duplex"
    # The dense all-reduce takes ~100x the sparse ones: on one log axis both
    # look flat, so it gets a panel of its own (both linear, from 0), where the
    # sparse lines' log P and P growth can be read.
    times = [t for pts in by_algo.values() for _, t in pts if t > 0]
    split = "dense" in by_algo and len(by_algo) > 1 and max(times) / min(times) > 30
    if split:
        fig, (ax, axd) = plt.subplots(1, 2, figsize=(10, 4.6),
                                      gridspec_kw={"width_ratios": [3, 2]})
    else:
        fig, ax = plt.subplots(figsize=(7.5, 5))
        axd = ax
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, pts) in enumerate(sorted(by_algo.items())):
        pts.sort()
        c = colors[i % len(colors)]
        a = axd if name == "dense" else ax
        a.plot([p for p, _ in pts], [t / 1e3 for _, t in pts], marker="o", color=c,
               label=name + " (measured)")
        print("time %s: %s" % (name, ", ".join("P=%d %.4g ms" % (p, t / 1e3) for p, t in pts)))
        if name in model:
            mp = model[name]
            a.plot([p for p, _ in mp], [t / 1e3 for _, t in mp], ls="--", color=c, lw=1,
                   marker="x", ms=3, label=name + " (model)")
            got = dict(pts)
            print("model %s: %s" % (name, ", ".join(
                "P=%d %.4g ms (measured/model %.2f)" % (p, t / 1e3, got[p] / t)
                for p, t in mp if p in got and t > 0)))
    if how:
        print("model: %s" % how)
    ranks = sorted({p for pts in by_algo.values() for p, _ in pts})
    for a in ((ax, axd) if split else (ax,)):
        a.set_xlabel("ranks")
        a.set_ylabel("time per operation (ms)")
        a.set_xticks(ranks)
        a.grid(True, alpha=0.3)
        a.legend(fontsize=8)
    if split:
        ax.set_ylim(bottom=0)
        axd.set_ylim(bottom=0)
        axd.set_title("dense ring, same n", fontsize=10)
    elif times and max(times) / min(times) > 30:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    d0 = docs[0]
    auto = "time vs ranks"
    if d0.get("benchmark") == "sc_gtopk_perf":
        auto = "sparse all-reduce, n = %d, density %.3g%s" % (
            d0["n"], d0["density"], (", %g Gbit/s links" % (link_bps / 1e9)) if link_bps else "")
    ax.set_title(title or auto, fontsize=10)
    if how:
        # Under the axes: inside them it would sit on the lines.
        fig.text(0.01, 0.01, "model: " + how, fontsize=7, va="bottom")
        fig.tight_layout(rect=(0, 0.04, 1, 1))
    else:
        fig.tight_layout()
    path = os.path.join(outdir, "time_vs_nranks.png")
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return [path]


# Fusion replay's policy names, as the papers call them.
POLICY_LABELS = {"wfbp": "WFBP", "size": "size buckets", "mgwfbp": "MG-WFBP", "dear": "DeAR",
                 "single": "single bucket", "p3": "P3", "lags": "LAGS", "omgs": "OMGS",
                 "gtopk": "single gTop-k"}
SPARSE_LABELS = {"wfbp": "LAGS", "mgwfbp": "OMGS", "single": "single gTop-k"}


def bar_error(e):
    """(below, above) of a bar's error from label_value_rows."""
    if isinstance(e, (int, float)):
        return (e, e)
    return tuple(e) if isinstance(e, tuple) else (0, 0)


def plot_bars(d, path_in, outdir, title, dpi=120):
    bars = label_value_rows(d)
    if d.get("benchmark") == "sc_fusion_replay":
        names = dict(POLICY_LABELS, **(SPARSE_LABELS if d.get("density") else {}))
        bars = [(names.get(lab, lab), v, e) for lab, v, e in bars]
    rows = d["bars"] if isinstance(d.get("bars"), list) else (first_list_of_dicts(d) or [{}] * len(bars))
    fig, ax = plt.subplots(figsize=(max(5, 1 + 0.9 * len(bars)), 4.5))
    labels = [b[0] for b in bars]
    vals = [b[1] for b in bars]
    errs = [bar_error(b[2]) for b in bars]
    yerr = [[e[0] for e in errs], [e[1] for e in errs]]
    ax.bar(range(len(bars)), vals, yerr=yerr if any(map(any, errs)) else None, capsize=3,
           color="tab:blue",
           label={"iter_ms": "iteration time"}.get(
               next((k for k in VALUE_KEYS if all(k in r for r in rows)), None)))
    # Fusion replay rows also carry the non-overlapped communication and the
    # lower bound max(compute, communication): drawn over each bar.
    if all(isinstance(r.get("nonoverlap_ms"), (int, float)) for r in rows):
        ax.bar(range(len(bars)), [r["nonoverlap_ms"] for r in rows], width=0.4,
               color="tab:orange", label="non-overlapped communication")
    if all(isinstance(r.get("lower_bound_ms"), (int, float)) for r in rows):
        ax.scatter(range(len(bars)), [r["lower_bound_ms"] for r in rows], marker="_", s=900,
                   color="black", zorder=3, label="lower bound")
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels(labels, rotation=30, ha="right")
    lb = d.get("lower_bound")
    if isinstance(lb, (int, float)):
        ax.axhline(lb, color="black", ls=":", label="lower bound")
    tops = [v + e[1] for v, e in zip(vals, errs)]
    # Bars below zero (a gain that is a loss) get room below the axis too.
    bottom = min([v - e[0] for v, e in zip(vals, errs)] + [0])
    top = max(tops + [lb if isinstance(lb, (int, float)) else 0])
    ax.set_ylim(bottom * 1.3, top * 1.3 if top > 0 else 1)
    if bottom < 0:
        ax.axhline(0, color="black", lw=0.8)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper right")
    vkey = next((k for k in VALUE_KEYS if rows and all(k in r for r in rows)), "")
    unit = "ms" if vkey.endswith("_ms") else "us" if vkey.endswith("_us") else ""
    vname = {"iter_ms": "iteration time"}.get(vkey, vkey)
    ax.set_ylabel(d.get("ylabel") or d.get("unit") or ("%s (%s)" % (vname, unit) if unit else "value"))
    base = os.path.splitext(os.path.basename(path_in))[0]
    if d.get("benchmark") == "sc_fusion_replay":
        auto_title = "fusion replay: %s, %s ranks" % (d.get("trace", "?"), d.get("ranks", "?"))
        more = []
        if isinstance(d.get("iter_ms_target"), (int, float)):
            more.append("compute %g ms" % d["iter_ms_target"])
        if d.get("scale", 1) != 1:
            more.append("tensors x %g" % d["scale"])
        if d.get("density"):
            more.append("density %g" % d["density"])
        if more:  # a second line: one would not fit over a few bars
            auto_title += "\n" + ", ".join(more)
    else:
        auto_title = d.get("title") or base
    ax.set_title(title or auto_title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(outdir, "bars_%s.png" % base)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    print("bars %s: %s" % (base, ", ".join(
        "%s=%.4g" % (lab, v) + (" (%.4g-%.4g)" % (v - e[0], v + e[1]) if any(e) else "")
        for lab, v, e in zip(labels, vals, errs))))
    return [path]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("-o", "--outdir", default=".")
    ap.add_argument("--link", type=parse_rate, help="link rate, e.g. 1gbit (draws the ceilings)")
    ap.add_argument("--kind", choices=["dense", "compare", "peers", "sparse", "bars"])
    ap.add_argument("--title")
    ap.add_argument("--model", choices=["link", "fit", "none"],
                    help="sparse figure's cost model (default: link with --link, else fit)")
    ap.add_argument("--duplex", choices=["half", "full"], default="full",
                    help="sparse model: full (default) charges one direction per exchange "
                    "(docs/ALGORITHMS.md's and the papers' formulas; what sc-netbed's links "
                    "are), half a rank's sent and received bytes both (old figures)")
    ap.add_argument("--local-work", action="store_true",
                    help="sparse model: add the merge work sc_gtopk_perf measured on one core "
                    "(merge_ns_per_entry) to the gTop-k lines")
    ap.add_argument("--cores", type=int, default=0,
                    help="with --local-work: P ranks share this many cores, so the merge time "
                    "is scaled by max(1, P/cores) (0: a core per rank)")
    ap.add_argument("--dpi", type=int, default=120,
                    help="PNG resolution (default 120; 80-100 keeps committed figures small)")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)

    series, sparse_docs, written = [], [], []
    link = args.link
    for path in args.files:
        try:
            with open(path) as f:
                d = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit("plot.py: %s: %s" % (path, e))
        kind = args.kind or kind_of(d)
        if kind is None:
            sys.exit("plot.py: %s: not a JSON this script knows (use --kind)" % path)
        if kind in ("dense", "compare", "peers"):
            series += series_from(d, kind, path)
            # allreduce_compare.sh --netbed records the bed's rate.
            if link is None and isinstance(d.get("netbed"), dict):
                link = d["netbed"].get("rate_bps") or None
        elif kind == "sparse":
            if not sparse_rows(d):
                sys.exit("plot.py: %s: no rows with an algorithm name and a time" % path)
            sparse_docs.append(d)
        else:
            if not label_value_rows(d):
                sys.exit("plot.py: %s: no label/value rows" % path)
            written += plot_bars(d, path, args.outdir, args.title, args.dpi)
    if series:
        written += plot_busbw(series, args.outdir, link, args.title, args.dpi)
    if sparse_docs:
        written += plot_sparse(sparse_docs, args.outdir, args.title, args.model, args.link,
                               args.dpi, args.duplex == "full", args.local_work, args.cores)
    for w in written:
        print("wrote %s" % w)


if __name__ == "__main__":
    main()
