#!/usr/bin/env python3
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

Usage: perf/paired.py [-b BASELINE] FILE.json [FILE.json ...]
  -b BASELINE   the policy the others are compared with (default: the first
                in each file)
Several files are pooled per policy pair, round by round.
"""

import json
import math
import statistics
import sys


def sign_test_p(wins, ties, n):
    """P(at least wins + ties/2 wins of n fair coin flips): ties count as half
    a win, rounded down, so that a tie never helps the claim."""
    k = wins + ties // 2
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2.0**n


def pair_rows(runs, baseline=None):
    """runs: list of replay JSON objects. Returns one row per other policy:
    (policy, baseline, rounds, wins, ties, median_diff_ms, median_diff_pct, p)."""
    pairs = {}
    base_name = baseline
    for d in runs:
        s = d.get("iter_samples_ms")
        if not s:
            raise ValueError("no iter_samples_ms: run sc_fusion_replay with --interleave -J")
        names = [r["policy"] for r in d["results"]]
        b = baseline or names[0]
        if base_name is None:
            base_name = b
        if b not in s:
            raise ValueError("policy %s not in the run (%s)" % (b, ", ".join(names)))
        for name in names:
            if name == b:
                continue
            p = pairs.setdefault(name, ([], []))
            n = min(len(s[b]), len(s[name]))
            p[0].extend(s[b][:n])
            p[1].extend(s[name][:n])
    rows = []
    for name, (base, other) in pairs.items():
        n = len(base)
        if n == 0:
            continue
        diff = [x - y for x, y in zip(base, other)]
        wins = sum(1 for x in diff if x > 0)
        ties = sum(1 for x in diff if x == 0)
        med = statistics.median(diff)
        rows.append((name, base_name, n, wins, ties, med, 100.0 * med / statistics.median(base),
                     sign_test_p(wins, ties, n)))
    return rows


def main(argv):
    baseline = None
    files = []
    i = 0
    while i < len(argv):
        if argv[i] == "-b" and i + 1 < len(argv):
            baseline = argv[i + 1]
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
    try:
        runs = [json.load(open(f)) for f in files]
        rows = pair_rows(runs, baseline)
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write("paired.py: %s\n" % e)
        return 1
    print("# %-8s %-8s %6s %5s %12s %9s %10s" % ("policy", "vs", "rounds", "wins", "median_ms",
                                                 "median_%", "sign_p"))
    for name, base, n, wins, ties, med, pct, p in rows:
        print("  %-8s %-8s %6d %5d %12.2f %+9.2f %10.2g" % (name, base, n, wins, med, pct, p))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
