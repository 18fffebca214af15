#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc_tune_fit reads -a compare JSON as sc_allreduce_perf writes it: three
# runs of 3 ranks, then the evaluation of the defaults (-n). Checked against
# the files themselves: every point's medians over the runs, and its regret =
# the measured median of the algorithm the model picked over the fastest
# median. Then a short fit must run and print its parameters.
top_builddir=${top_builddir:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tune_fit_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
py=""
for c in /usr/bin/python3 python3; do
  if "$c" -c 'import json' 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || { echo "SKIP: no python3 to read the JSON"; exit 77; }

# compare N TRANSPORT PERF JSON SIZES...: one -a compare run into JSON; exits on failure.
compare() {
  n=$1 tp=$2 perf=$3 json=$4
  shift 4
  if ! "$top_builddir/sc-run" -n "$n" --timeout 120 -x SC_TRANSPORT="$tp" \
    "$top_builddir/$perf" -a compare "$@" -n 4 -w 1 -J "$json" >"$tmp/out" 2>&1; then
    echo "FAIL: $perf -a compare ($json)"
    tail -n 20 "$tmp/out"
    exit 1
  fi
}

for rep in 1 2 3; do
  compare 3 shm sc_allreduce_perf "$tmp/r$rep.json" -b 8 -e 64K -f 32
done
if ! "$top_builddir/sc_tune_fit" -t shm -n "$tmp"/r1.json "$tmp"/r2.json "$tmp"/r3.json \
  >"$tmp/eval" 2>&1; then
  echo "FAIL: sc_tune_fit -n"
  cat "$tmp/eval"
  exit 1
fi
"$py" - "$tmp/eval" "$tmp"/r1.json "$tmp"/r2.json "$tmp"/r3.json <<'PYEOF' || exit 1
import json, statistics, sys
algs = ["ring", "tree", "rd", "rabenseifner"]
times = {}
for f in sys.argv[2:]:
    for row in json.load(open(f))["rows"]:
        for a in algs:
            times.setdefault(row["size"], {}).setdefault(a, []).append(row["time_us"][a])
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
assert len(rows) == len(times) == 3, (rows, times)
for r in rows:
    p, size = int(r[0]), int(r[1])
    assert p == 3, r
    med = [statistics.median(times[size][a]) for a in algs]
    for k in range(4):
        assert abs(float(r[2 + k]) - med[k]) <= 0.05 + 1e-3 * med[k], (r, med)
    pick = r[12]
    assert pick in algs and r[13] == algs[med.index(min(med))], (r, med)
    regret = med[algs.index(pick)] / min(med)
    assert abs(float(r[14]) - regret) <= 0.006, (r, regret)
    assert all(float(x) > 0 for x in r[7:11]), r
summary = [l for l in open(sys.argv[1]) if l.startswith("# 3 points:")]
assert len(summary) == 1, open(sys.argv[1]).read()
PYEOF
if ! "$top_builddir/sc_tune_fit" -t tcp -s 1 -i 40 -x turn_s=0 "$tmp"/r*.json >"$tmp/fit" 2>&1 ||
  ! grep -q '^# fitted parameters: .*turn_s=0 ' "$tmp/fit"; then
  echo "FAIL: sc_tune_fit's search"
  cat "$tmp/fit"
  exit 1
fi
# An all-gather's compare file has the same shape and other algorithms: refused.
compare 3 shm sc_allgather_perf "$tmp/ag.json" -b 1K -e 4K -f 4
if ! grep -q '"collective": "allgather"' "$tmp/ag.json"; then
  echo "FAIL: sc_allgather_perf -a compare wrote no all-gather file"
  exit 1
fi
if "$top_builddir/sc_tune_fit" -t shm -n "$tmp/ag.json" >"$tmp/ag" 2>&1 ||
  ! grep -q 'not the JSON of sc_allreduce_perf or sc_alltoall_perf -a compare' "$tmp/ag"; then
  echo "FAIL: sc_tune_fit took an all-gather's file"
  cat "$tmp/ag"
  exit 1
fi
# An all-to-all's compare file: its rows carry pairwise and Bruck, medians
# and the regret of the model's pick as in the file, the size that of one
# rank's send buffer.
compare 4 tcp sc_alltoall_perf "$tmp/a2a.json" -b 64 -e 4K -f 64
if ! "$top_builddir/sc_tune_fit" -t tcp -n "$tmp/a2a.json" >"$tmp/a2a" 2>&1; then
  echo "FAIL: sc_tune_fit -n on an all-to-all's file"
  cat "$tmp/a2a"
  exit 1
fi
"$py" - "$tmp/a2a" "$tmp/a2a.json" <<'PYEOF' || exit 1
import json, sys
algs = ["pairwise", "bruck"]
times = {row["size"]: [row["time_us"][a] for a in algs] for row in json.load(open(sys.argv[2]))["rows"]}
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
assert len(rows) == len(times) == 2, (rows, times)
for r in rows:
    p, size = int(r[0]), int(r[1])
    assert p == 4 and r[4] == "-" and r[5] == "-", r
    med = times[size]
    for k in range(2):
        assert abs(float(r[2 + k]) - med[k]) <= 0.05 + 1e-3 * med[k], (r, med)
    pick = r[12]
    assert pick in algs and r[13] == algs[med.index(min(med))], (r, med)
    assert abs(float(r[14]) - med[algs.index(pick)] / min(med)) <= 0.006, r
PYEOF
echo "PASS: sc_tune_fit's medians and regrets match the files (all-reduce and all-to-all); a held parameter stays; an all-gather's file is refused"
