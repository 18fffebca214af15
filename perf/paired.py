#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Paired comparison of two policies in sc_fusion_replay --interleave runs.

An interleaved run samples every policy once per round, the policies in
rotated order, so the samples of one round ran under the same load. When two
policies differ by less than the load moves a single sample, their ranges
overlap, yet one may still win nearly every round. This tool pairs the
samples by round (from the JSON's "iter_samples_ms") and prints, for
BASELINE against each OTHER policy:

  rounds   how many rounds both policies have a sample in
  wins     rounds in which OTHER's iteration was shorter
  median   the median of BASELINE - OTHER over the rounds, in ms and in %
           of BASELINE's median (positive: OTHER is faster)
  p        one-sided sign test: the chance of at least that many wins if
           either policy were as likely to win a round (ties count half)

Usage: perf/paired.py [-b BASELINE] [-p LIST] [--separate] [-J BARS.json] FILE.json ...
  -b BASELINE   the policy the others are compared with (default: the first
                in each file)
  -p LIST       compare only these policies (comma list) with the baseline
  --separate    one row per file and policy (labelled with the file's name)
                instead of pooling the files per policy, round by round
  -J BARS.json  also write the rows as a bar file for perf/plot.py: the median
                gain in %, its error bar the interquartile range of the
                per-round gains
"""

import json
import math
import os
import statistics
import sys


def sign_test_p(wins, ties, n):
    """P(at least wins + ties/2 wins of n fair coin flips): ties count as half
    a win, rounded down, so that a tie never helps the claim."""
    k = wins + ties // 2
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2.0**n


def quartiles(v):
    """(first, third) quartile of v, by statistics.quantiles' exclusive
    method; v itself for fewer than 2 values."""
    if len(v) < 2:
        return (v[0], v[0]) if v else (0.0, 0.0)
    q = statistics.quantiles(v, n=4)
    return q[0], q[2]


def pair_rows(runs, baseline=None, labels=None, only=None):
    """runs: list of replay JSON objects. Returns one row per other policy:
    (policy, baseline, rounds, wins, ties, median_diff_ms, median_diff_pct, p,
    q1_pct, q3_pct). With labels (one per run), the runs are not pooled: a
    row per run and policy, named "label: policy". only: the policies to
    compare (default all)."""
    pairs = {}  # (policy or "label: policy", baseline) -> (baseline's samples, its samples)
    for j, d in enumerate(runs):
        s = d.get("iter_samples_ms")
        if not s:
            raise ValueError("no iter_samples_ms: run sc_fusion_replay with --interleave -J")
        names = [r["policy"] for r in d["results"]]
        b = baseline or names[0]
        if b not in s:
            raise ValueError("policy %s not in the run (%s)" % (b, ", ".join(names)))
        for name in names:
            if name == b or (only is not None and name not in only):
                continue
            key = (name if labels is None else "%s: %s" % (labels[j], name), b)
            p = pairs.setdefault(key, ([], []))
            n = min(len(s[b]), len(s[name]))
            p[0].extend(s[b][:n])
            p[1].extend(s[name][:n])
    rows = []
    for (name, base_name), (base, other) in pairs.items():
        n = len(base)
        if n == 0:
            continue
        diff = [x - y for x, y in zip(base, other)]
        wins = sum(1 for x in diff if x > 0)
        ties = sum(1 for x in diff if x == 0)
        med = statistics.median(diff)
        scale = 100.0 / statistics.median(base)
        q1, q3 = quartiles(diff)
        rows.append((name, base_name, n, wins, ties, med, med * scale,
                     sign_test_p(wins, ties, n), q1 * scale, q3 * scale))
    return rows


def bars(rows):
    """The rows as perf/plot.py's bar file."""
    return {"title": "paired rounds: per-round gain over the baseline",
            "ylabel": "median gain per round (%), IQR",
            "bars": [{"label": "%s vs %s (%d/%d)" % (r[0], r[1], r[3], r[2]), "value": r[6],
                      "min": min(r[8], r[6]), "max": max(r[9], r[6])} for r in rows]}


def main(argv):
    baseline = None
    out = None
    separate = False
    only = None
    files = []
    i = 0
    while i < len(argv):
        if argv[i] == "-b" and i + 1 < len(argv):
            baseline = argv[i + 1]
            i += 2
        elif argv[i] == "-J" and i + 1 < len(argv):
            out = argv[i + 1]
            i += 2
        elif argv[i] == "-p" and i + 1 < len(argv):
            only = argv[i + 1].split(",")
            i += 2
        elif argv[i] == "--separate":
            separate = True
            i += 1
        elif argv[i] in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        else:
            files.append(argv[i])
            i += 1
    if not files:
        sys.stderr.write(__doc__.strip() + "\n")
        return 2
    try:
        runs = [json.load(open(f)) for f in files]
        labels = [os.path.splitext(os.path.basename(f))[0] for f in files] if separate else None
        rows = pair_rows(runs, baseline, labels, only)
        if out:
            with open(out, "w") as f:
                json.dump(bars(rows), f, indent=1)
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write("paired.py: %s\n" % e)
        return 1
    w = max([8] + [len(r[0]) for r in rows])
    print("# %-*s %-8s %6s %5s %12s %9s %10s" % (w, "policy", "vs", "rounds", "wins", "median_ms",
                                                 "median_%", "sign_p"))
    for name, base, n, wins, ties, med, pct, p, _, _ in rows:
        print("  %-*s %-8s %6d %5d %12.2f %+9.2f %10.2g" % (w, name, base, n, wins, med, pct, p))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
