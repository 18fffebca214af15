#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The perf binaries under sc-run: every collective, dtype and op on small
# sizes with checking on, 2 and 3 ranks (3 gives uneven ring blocks); plus the
# JSON output and the usage errors. Needs a working library.
top_builddir=${top_builddir:-.}
SC_RUN="$top_builddir/sc-run"
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/perf_smoke_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() {
  fail=$((fail + 1))
  echo "FAIL: $1"
  tail -n 20 "$tmp/out" "$tmp/err" 2>/dev/null | sed 's/^/  /'
}

for np in 2 3; do
  for coll in allreduce reduce_scatter allgather broadcast reduce; do
    bin="$top_builddir/sc_${coll}_perf"
    root_arg=""
    case $coll in broadcast | reduce) root_arg="-r $((np - 1))" ;; esac
    "$SC_RUN" -n $np --timeout 300 "$bin" -b 0 -e 40K -f 5 -n 2 -w 1 -d all -o all $root_arg \
      >"$tmp/out" 2>"$tmp/err"
    rc=$?
    rows=$(grep -cv '^#' "$tmp/out")
    if [ $rc -eq 0 ] && grep -q '^# Out of bounds values : 0 OK$' "$tmp/out" && [ "$rows" -gt 0 ] &&
      grep -q '^#  Rank  1 Group  0 Pid' "$tmp/out" &&
      ! grep -v '^#' "$tmp/out" | awk '$9 != 0 || $13 != 0 { bad = 1 } END { exit !bad }'; then
      ok "sc_${coll}_perf, $np ranks: $rows rows, all checks pass"
    else
      bad "sc_${coll}_perf, $np ranks (rc=$rc rows=$rows)"
    fi
  done
done

# Column layout and the size rounding of reduce-scatter: 3 ranks x 4-byte floats.
"$SC_RUN" -n 3 --timeout 120 "$top_builddir/sc_reduce_scatter_perf" -b 100 -e 100 -n 1 -w 0 \
  >"$tmp/out" 2>"$tmp/err"
row=$(grep -v '^#' "$tmp/out")
set -- $row
if [ "$1" = 96 ] && [ "$2" = 8 ] && [ "$3" = float ] && [ "$4" = sum ] && [ "$5" = -1 ]; then
  ok "reduce-scatter rounds 100 B to 96 B = 3 x 8 floats"
else
  bad "reduce-scatter row '$row'"
fi

# -J writes valid JSON with one row per size.
"$SC_RUN" -n 2 --timeout 120 "$top_builddir/sc_allreduce_perf" -b 8 -e 1K -f 2 -n 2 -w 1 \
  -a ring -J "$tmp/out.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && command -v python3 >/dev/null 2>&1; then
  if python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["binary"] == "sc_allreduce_perf" and d["nranks"] == 2, d
assert d["algo"] == {"variable": "SC_ALGO", "value": "ring"}, d["algo"]
assert [r["size"] for r in d["rows"]] == [8 << i for i in range(8)], d["rows"]
assert all(r["out_of_place"]["wrong"] == 0 and r["in_place"]["wrong"] == 0 for r in d["rows"])
assert d["out_of_bounds"] == 0 and len(d["ranks"]) == 2
' "$tmp/out.json"; then
    ok "-J writes the rows and settings as JSON"
  else
    bad "-J output"
  fi
elif [ $rc -eq 0 ] && [ -s "$tmp/out.json" ]; then
  ok "-J writes a file (python3 missing: not parsed)"
else
  bad "-J run (rc=$rc)"
fi

# -a compare: a row per size, every algorithm column a time or n/a (the
# algorithms that are not written yet are n/a, with a # line saying why),
# ring and auto always timed, and exit status 0.
cmp_rows='
  function num(x) { return x ~ /^[0-9]+(\.[0-9]+)?$/ }
  function tm(x) { return num(x) || x == "n/a" }
  function nm(x) { return x ~ /^(ring|tree|rd|rabenseifner|hier|n\/a)$/ }
  {
    n++
    if (NF != 11 || $1 != 8 * 2 ^ (n - 1) || $2 != $1 / 4 || !num($3) || !tm($4) || !tm($5) ||
        !tm($6) || !tm($7) || !num($8) || !nm($9) || !nm($10) || !tm($11)) { bad = 1; print "bad row: " $0 }
  }
  END { exit !(n == want && !bad) }'
for np in 2 3; do
  json_arg=""
  [ $np -eq 2 ] && json_arg="-J $tmp/cmp.json"
  "$SC_RUN" -n $np --timeout 300 "$top_builddir/sc_allreduce_perf" -a compare -b 8 -e 64K -n 2 -w 1 \
    $json_arg >"$tmp/out" 2>"$tmp/err"
  rc=$?
  rows=$(grep -cv '^#' "$tmp/out")
  notes_ok=1 # every algorithm with an n/a time has a # line saying why
  na=""
  col=3
  for algo in ring tree rd rabenseifner hier auto; do
    if grep -v '^#' "$tmp/out" | awk -v c=$col '$c == "n/a" { f = 1 } END { exit !f }'; then
      na="$na $algo"
      grep -Eq "^# (n/a|FAILED) $algo \(" "$tmp/out" || notes_ok=0
    fi
    col=$((col + 1))
  done
  if [ $rc -eq 0 ] && [ $notes_ok -eq 1 ] &&
    grep -Eq '^# +size +count +ring +tree +rd +rabenseifner +hier +auto +best +auto-pick +auto/best$' \
      "$tmp/out" &&
    grep -v '^#' "$tmp/out" | awk -v want=14 "$cmp_rows" >"$tmp/err.rows" &&
    grep -q '^# Out of bounds values : 0 OK$' "$tmp/out" &&
    grep -Eq '^# auto within 10% of the best at [0-9]+ of [0-9]+ sizes$' "$tmp/out"; then
    ok "sc_allreduce_perf -a compare, $np ranks: $rows rows, n/a at some size:${na:- none}"
  else
    cat "$tmp/err.rows" >>"$tmp/err" 2>/dev/null
    bad "sc_allreduce_perf -a compare, $np ranks (rc=$rc rows=$rows notes_ok=$notes_ok)"
  fi
done

# The reduce-scatter's and all-gather's compare: their own columns, every result checked
# (exit 0, no wrong elements), each row's best and auto pick one of their algorithms.
for pair in "reduce_scatter recursive-halving" "allgather recursive-doubling"; do
  set -- $pair
  "$SC_RUN" -n 3 --timeout 300 "$top_builddir/sc_$1_perf" -a compare -b 96 -e 96K -f 32 -n 2 -w 1 \
    >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 0 ] &&
    grep -Eq "^# +size +count +ring +$2 +hier +auto +best +auto-pick +auto/best\$" "$tmp/out" &&
    grep -v '^#' "$tmp/out" | awk -v a="$2" '
      function num(x) { return x ~ /^[0-9]+(\.[0-9]+)?$/ }
      function nm(x) { return x == "ring" || x == a || x == "hier" }
      { n++; if (NF != 9 || !num($3) || !num($4) || !num($5) || !num($6) || !nm($7) || !nm($8)) bad = 1 }
      END { exit !(n == 3 && !bad) }' &&
    grep -q '^# Out of bounds values : 0 OK$' "$tmp/out"; then
    ok "sc_$1_perf -a compare, 3 ranks"
  else
    bad "sc_$1_perf -a compare, 3 ranks (rc=$rc)"
  fi
done
if command -v python3 >/dev/null 2>&1; then
  if [ -s "$tmp/cmp.json" ] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
names = ["ring", "tree", "rd", "rabenseifner", "hier", "auto"]
assert d["mode"] == "compare" and d["algorithms"] == names and d["nranks"] == 2, d
assert [r["size"] for r in d["rows"]] == [8 << i for i in range(14)], d["rows"]
for r in d["rows"]:
    assert sorted(r["time_us"]) == sorted(names) and sorted(r["wrong"]) == sorted(names), r
    assert all(r["wrong"][a] in (0, None) for a in names), r
    assert all((r["time_us"][a] is None) == (r["wrong"][a] is None) for a in names), r
    assert r["time_us"]["ring"] is not None and r["time_us"]["auto"] is not None, r
    assert r["best"] in names[:5] and r["auto_pick"] in names[:5], r
    assert r["auto_over_best"] is not None, r
assert d["out_of_bounds"] == 0 and d["failed"] is False
assert d["sizes_compared"] == 14 and 0 <= d["auto_within_10pct"] <= 14
' "$tmp/cmp.json"; then
    ok "-a compare -J writes every column as JSON"
  else
    bad "-a compare -J output"
  fi
fi

# sc_fusion_replay -J: each policy's range. --repeat 3: the JSON's min and max
# are the fastest and slowest of the three "run" rows the text prints, the
# median between them; --interleave: the range the text's tag gives (whole ms).
# plot.py turns the range into asymmetric error bars and reads files without it.
top_srcdir=${top_srcdir:-..}
replay() {
  "$SC_RUN" -n 2 --timeout 200 "$top_builddir/sc_fusion_replay" \
    --trace "$top_srcdir/perf/traces/resnet50.trace" --scale 0.01 --iter-ms 5 -i 2 -w 0 \
    -p wfbp,mgwfbp,single --alpha 50 --beta 0.001 "$@"
}
py=""
for c in /usr/bin/python3 python3; do # Debian's python3-matplotlib is /usr/bin's
  if "$c" -c 'import json' 2>/dev/null; then py=$c; break; fi
done
if [ -z "$py" ]; then
  echo "SKIP-PART: no python3: sc_fusion_replay -J not parsed"
elif replay -r 3 -J "$tmp/rep.json" >"$tmp/rep.out" 2>"$tmp/err" &&
  replay --interleave -J "$tmp/il.json" >"$tmp/il.out" 2>>"$tmp/err"; then
  cp "$tmp/il.out" "$tmp/out"
  if SC_PLOT_REEXEC=1 "$py" - "$tmp" "$top_srcdir/perf/plot.py" <<'PYEOF' >>"$tmp/out" 2>&1; then
import importlib.util, json, os, re, sys
tmp = sys.argv[1]
rep = json.load(open(os.path.join(tmp, "rep.json")))
il = json.load(open(os.path.join(tmp, "il.json")))
runs = {}
for line in open(os.path.join(tmp, "rep.out")):
    f = line.split()
    if len(f) > 3 and f[-1] == "run":
        runs.setdefault(f[0], []).append(float(f[2]))
assert sorted(runs) == ["mgwfbp", "single", "wfbp"], runs
for r in rep["results"]:
    t = runs[r["policy"]]
    assert len(t) == 3 and abs(r["iter_min_ms"] - min(t)) < 0.006, (r, t)
    assert abs(r["iter_max_ms"] - max(t)) < 0.006 and abs(r["iter_ms"] - sorted(t)[1]) < 0.006, (r, t)
tags = {}
for line in open(os.path.join(tmp, "il.out")):
    m = re.match(r"\s+(\w+) .* median of \d+, iter (\d+)-(\d+)$", line)
    if m:
        tags[m.group(1)] = (int(m.group(2)), int(m.group(3)))
assert sorted(tags) == ["mgwfbp", "single", "wfbp"], tags
for r in il["results"]:
    lo, hi = tags[r["policy"]]
    assert 0 < r["iter_min_ms"] <= r["iter_ms"] <= r["iter_max_ms"], r
    assert abs(r["iter_min_ms"] - lo) <= 0.5001 and abs(r["iter_max_ms"] - hi) <= 0.5001, (r, lo, hi)
# The samples in round order: their median, least and largest are the
# policy's iteration time and range; 2 iterations x 1 repeat = 2 rounds.
import statistics
samples = il["iter_samples_ms"]
assert sorted(samples) == ["mgwfbp", "single", "wfbp"], samples
for r in il["results"]:
    v = samples[r["policy"]]
    assert len(v) == 2, v
    assert abs(statistics.median(v) - r["iter_ms"]) < 0.002, (v, r)
    assert abs(min(v) - r["iter_min_ms"]) < 0.002 and abs(max(v) - r["iter_max_ms"]) < 0.002, (v, r)
# perf/paired.py against a hand-worked case: differences 1, 1, -1, 0 give
# 2 wins and 1 tie of 4, median 0.5 ms = 5% of the baseline's median 10, and
# P(at least 2 of 4 fair flips) = 11/16.
pspec = importlib.util.spec_from_file_location("paired", os.path.join(os.path.dirname(sys.argv[2]), "paired.py"))
paired = importlib.util.module_from_spec(pspec)
pspec.loader.exec_module(paired)
hand = {"results": [{"policy": "a"}, {"policy": "b"}],
        "iter_samples_ms": {"a": [10, 10, 10, 10], "b": [9, 9, 11, 10]}}
rows = paired.pair_rows([hand])
assert len(rows) == 1, rows
name, base, n, wins, ties, med, pct, p, q1, q3 = rows[0]
assert (name, base, n, wins, ties) == ("b", "a", 4, 2, 1), rows
assert abs(med - 0.5) < 1e-12 and abs(pct - 5.0) < 1e-9 and abs(p - 11 / 16) < 1e-12, rows
# Quartiles of -1, 0, 1, 1 (exclusive method: positions 1.25 and 3.75) are
# -0.75 and 1 ms, -7.5% and +10% of 10 ms; the bar file carries them.
assert abs(q1 + 7.5) < 1e-9 and abs(q3 - 10.0) < 1e-9, rows
b = paired.bars(rows)["bars"]
assert b == [{"label": "b vs a (2/4)", "value": pct, "min": q1, "max": q3}], b
assert [r[0] for r in paired.pair_rows([hand, hand], None, ["r1", "r2"])] == ["r1: b", "r2: b"]
assert [r[0] for r in paired.pair_rows([il], None, None, ["single"])] == ["single"]
assert paired.pair_rows([hand], "b")[0][:4] == ("a", "b", 4, 1), paired.pair_rows([hand], "b")
assert abs(paired.sign_test_p(0, 0, 3) - 1.0) < 1e-12 and abs(paired.sign_test_p(3, 0, 3) - 1 / 8) < 1e-12
n_il = len(paired.pair_rows([il]))
assert n_il == 2, n_il
spec = importlib.util.spec_from_file_location("plot", sys.argv[2])
try:
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
except SystemExit:
    print("SKIP-PART: plot.py needs matplotlib; error bars not checked")
    sys.exit(0)
bars = plot.label_value_rows(il)
want = [(r["policy"], r["iter_ms"], (r["iter_ms"] - r["iter_min_ms"], r["iter_max_ms"] - r["iter_ms"]))
        for r in il["results"]]
assert bars == want, (bars, want)
for r in il["results"]:  # as written before the range existed
    del r["iter_min_ms"], r["iter_max_ms"]
assert [b[2] for b in plot.label_value_rows(il)] == [None] * 3
assert plot.label_value_rows({"bars": [{"label": "x", "value": 2.0, "error": 0.5}]}) == [("x", 2.0, 0.5)]
out = plot.plot_bars(rep, os.path.join(tmp, "rep.json"), tmp, None, 60)
assert out and os.path.getsize(out[0]) > 0, out
print("plot.py: error bars %s" % [b[2] for b in bars])
PYEOF
    grep '^SKIP-PART' "$tmp/out"
    ok "sc_fusion_replay -J: each policy's range (--repeat, --interleave) and plot.py's error bars"
  else
    bad "sc_fusion_replay -J range"
  fi
else
  bad "sc_fusion_replay runs"
fi

# The sparse replay with the Gaussian selector, interleaved: the JSON names
# the selector and holds each policy's samples; a misspelt selector is a
# usage error (exit 2).
if [ -n "$py" ] && "$SC_RUN" -n 2 --timeout 200 "$top_builddir/sc_fusion_replay" \
  --trace "$top_srcdir/perf/traces/resnet50.trace" --scale 0.01 --iter-ms 5 -i 3 -w 0 \
  --density 0.01 --select gaussian -p lags,omgs --alpha 50 --beta 0.001 --interleave \
  -J "$tmp/sp.json" >"$tmp/sp.out" 2>"$tmp/err" &&
  "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["select"] == "gaussian" and d["density"] == 0.01, d
assert [r["policy"] for r in d["results"]] == ["lags", "omgs"], d["results"]
assert all(len(d["iter_samples_ms"][p]) == 3 for p in ("lags", "omgs")), d["iter_samples_ms"]
' "$tmp/sp.json"; then
  "$top_builddir/sc_fusion_replay" --select fastest >"$tmp/out" 2>"$tmp/err"
  if [ $? -eq 2 ]; then
    ok "sc_fusion_replay --density --select gaussian --interleave -J"
  else
    bad "sc_fusion_replay --select fastest is not a usage error"
  fi
elif [ -n "$py" ]; then
  bad "sc_fusion_replay --density --select gaussian run"
fi

# Entries POLICY+MODE pair compression modes in one interleaved run: the rows
# in -p's order, named as -p spells them, each with its samples; +topk without
# --density and an unknown mode are usage errors (exit 2).
replay_plus() {
  "$SC_RUN" -n 2 --timeout 200 "$top_builddir/sc_fusion_replay" \
    --trace "$top_srcdir/perf/traces/resnet50.trace" --scale 0.01 --iter-ms 5 -i 2 -w 0 \
    --alpha 50 --beta 0.001 --interleave "$@"
}
if [ -n "$py" ] && replay_plus --density 0.01 -p mgwfbp+acpsgd,wfbp+none,mgwfbp+topk,size+fp16 \
  -J "$tmp/plus.json" >"$tmp/plus.out" 2>"$tmp/err" &&
  "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
names = ["mgwfbp+acpsgd", "wfbp+none", "mgwfbp+topk", "size+fp16"]
assert [r["policy"] for r in d["results"]] == names, d["results"]
assert all(len(d["iter_samples_ms"][p]) == 2 for p in names), d["iter_samples_ms"]
' "$tmp/plus.json"; then
  replay_plus -p mgwfbp+topk >"$tmp/out" 2>"$tmp/err"
  rc1=$?
  replay_plus -p mgwfbp+zip >"$tmp/out" 2>>"$tmp/err"
  rc2=$?
  if [ $rc1 -eq 2 ] && [ $rc2 -eq 2 ]; then
    ok "sc_fusion_replay -p POLICY+MODE entries, interleaved"
  else
    bad "sc_fusion_replay -p: +topk without --density ($rc1) or an unknown mode ($rc2) not a usage error"
  fi
elif [ -n "$py" ]; then
  cat "$tmp/plus.out" "$tmp/err"
  bad "sc_fusion_replay -p POLICY+MODE run"
fi

# sc_gtopk_perf --select --dist ef: the residual of error feedback, with the
# Gaussian selector's count within its contract, [k/2, 2k], k = 100.
if [ -n "$py" ] && "$top_builddir/sc_gtopk_perf" --select --dist ef -n 100000 --iters 2 \
  -J "$tmp/ef.json" >"$tmp/out" 2>"$tmp/err" && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["dist"] == "ef" and d["n"] == 100000 and d["k"] == 100, d
assert 50 <= d["gaussian_count"] <= 200, d
assert d["exact_ms"] > 0 and d["gaussian_ms"] > 0, d
' "$tmp/ef.json"; then
  ok "sc_gtopk_perf --select --dist ef -J"
elif [ -n "$py" ]; then
  bad "sc_gtopk_perf --select --dist ef"
fi

# Usage errors exit 2 before any communication is set up.
"$top_builddir/sc_allreduce_perf" -d nosuchtype >"$tmp/out" 2>"$tmp/err"
rc1=$?
"$top_builddir/sc_broadcast_perf" -a compare >"$tmp/out" 2>"$tmp/err"
rc2=$?
"$top_builddir/sc_broadcast_perf" --help >"$tmp/out" 2>"$tmp/err"
rc3=$?
if [ $rc1 -eq 2 ] && [ $rc2 -eq 2 ] && [ $rc3 -eq 0 ] && grep -q 'Usage: sc-run' "$tmp/out"; then
  ok "usage errors exit 2, --help exits 0"
else
  bad "usage errors (rc=$rc1,$rc2,$rc3)"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
