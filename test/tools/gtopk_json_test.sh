#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc_gtopk_perf -J, which the time-vs-ranks figure and its cost model read
# (perf/plot.py): every algorithm's row with a correct result (the tool checks
# each rank's output against a reference it builds from all ranks' inputs),
# the run's n, k, widths and the 8-byte all-reduce latency; and plot.py's
# model turns those into the documented costs. 3 ranks: non-power-of-two fold.
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-..}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gtopk_json_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
py=""
for c in /usr/bin/python3 python3; do
  if "$c" -c 'import json' 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || { echo "SKIP: no python3 to read the JSON"; exit 77; }

if ! "$top_builddir/sc-run" -n 3 --timeout 200 "$top_builddir/sc_gtopk_perf" -n 65536 -k 100 \
  -w 1 -i 2 -J "$tmp/g.json" >"$tmp/out" 2>"$tmp/err"; then
  echo "FAIL: sc_gtopk_perf -J under sc-run"
  tail -n 20 "$tmp/out" "$tmp/err"
  exit 1
fi
SC_PLOT_REEXEC=1 "$py" - "$tmp/g.json" "$top_srcdir/perf/plot.py" <<'PYEOF' || exit 1
import importlib.util, json, sys
d = json.load(open(sys.argv[1]))
assert d["benchmark"] == "sc_gtopk_perf" and d["nranks"] == 3, d
assert d["n"] == 65536 and d["k"] == 100 and d["dtype_bytes"] == 4 and d["index_bytes"] == 4, d
assert d["iters"] == 2 and d["warmup"] == 1 and d["check"] == 1, d
assert d["latency_8B_allreduce_us"] > 0 and d["latency_algo"], d
# One merge of two 100-entry sets: far above 0, far below a millisecond per entry.
assert 0 < d["merge_ns_per_entry"] < 1e6, d
algos = [r["algo"] for r in d["rows"]]
assert algos == ["gtopk", "tree", "allgather", "dense"], algos
for r in d["rows"]:
    assert r["wrong"] == 0, r
    assert 0 < r["time_min_us"] <= r["time_us"], r
    assert r["sent_bytes_max"] >= r["sent_bytes_mean"] > 0, r
# The sparse results hold at most k entries except the exact all-gather sum;
# dense holds n.
nnz = {r["algo"]: r["out_nnz"] for r in d["rows"]}
assert nnz["gtopk"] == nnz["tree"] == 100 and 100 < nnz["allgather"] <= 300, nnz
assert nnz["dense"] == 65536, nnz
# plot.py's cost terms for this run, against docs/ALGORITHMS.md worked by hand:
# full duplex, one set's bytes per step (P = 3: butterfly log2 floor 1 + 2 fold
# steps, tree 2 x ceil(log2 3) = 4 steps, ring all-gather 2; P = 5: 2 + 2,
# 2 x 3, 4), and --duplex half, a rank's sent and received bytes both.
spec = importlib.util.spec_from_file_location("plot", sys.argv[2])
try:
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
except SystemExit:
    print("SKIP-PART: plot.py needs matplotlib; model terms not checked")
    sys.exit(0)
e = 100 * 8
assert plot.model_terms("dense", 3, d) == (4, 2.0 * 2 / 3 * 65536 * 4)
assert plot.model_terms("gtopk", 3, d) == (3, 3 * e)
assert plot.model_terms("tree", 3, d) == (4, 4 * e)
assert plot.model_terms("allgather", 3, d) == (2, 2 * e)
assert plot.model_terms("gtopk", 5, d) == (4, 4 * e)
assert plot.model_terms("tree", 5, d) == (6, 6 * e)
assert plot.model_terms("allgather", 5, d) == (4, 4 * e)
assert plot.model_terms("dense", 3, d, False) == plot.model_terms("dense", 3, d)
assert plot.model_terms("gtopk", 3, d, False) == (3, 2 * 3 * e)
assert plot.model_terms("tree", 3, d, False) == (4, 2 * 4 * e)
assert plot.model_terms("allgather", 5, d, False) == (3, 4 * e)
# The merge work by hand: the butterfly merges two 100-sets per exchange,
# P = 3: 1 exchange + the fold's merge = 2 merges, P = 4: 2, P = 8: 3; the
# tree's root ceil(log2 P); none modelled for the all-gather or dense.
m = {"k": 100, "merge_ns_per_entry": 10.0}
assert plot.merge_entries("gtopk", 3, m) == 2 * 200
assert plot.merge_entries("gtopk", 4, m) == 2 * 200
assert plot.merge_entries("gtopk", 8, m) == 3 * 200
assert plot.merge_entries("tree", 5, m) == 3 * 200
assert plot.merge_entries("allgather", 5, m) is None
assert abs(plot.local_us("gtopk", 8, m) - 3 * 200 * 10.0 / 1000) < 1e-9
assert abs(plot.local_us("gtopk", 8, m, cores=2) - 4 * 3 * 200 * 10.0 / 1000) < 1e-9
assert plot.local_us("gtopk", 2, m, cores=2) == plot.local_us("gtopk", 2, m)
assert plot.local_us("gtopk", 4, {"k": 100}) == 0.0
a, b = plot.fit_alpha_beta([(1, 0, 3.0), (0, 1, 5.0), (1, 1, 8.0)])
assert abs(a - 3) < 1e-9 and abs(b - 5) < 1e-9, (a, b)
print("PASS: sc_gtopk_perf -J: 4 algorithms correct at 3 ranks, latency %.1f us; plot model terms"
      % d["latency_8B_allreduce_us"])
PYEOF
