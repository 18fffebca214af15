#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc_alltoall_perf (even and -v), sc_gather_perf and sc_scatter_perf under
# sc-run, as perf_smoke_test.sh runs the other collectives: small sizes with
# checking on, 2 and 3 ranks (3: blocks that do not divide evenly, a root
# other than 0), every dtype on 3; -a compare's columns; the -v count matrix
# against the peers' copy in perf/compare/gloo_alltoall.py; JSON; usage
# errors. Needs a working library.
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-..}
SC_RUN="$top_builddir/sc-run"
B=$top_builddir
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/perf_a2a_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() {
  fail=$((fail + 1))
  echo "FAIL: $1"
  tail -n 20 "$tmp/out" "$tmp/err" 2>/dev/null | sed 's/^/  /'
}

# swept NAME WANT_ROWS INPLACE CMD...: exit 0, "0 OK", WANT_ROWS rows whose
# #wrong columns are 0 (INPLACE na: the in-place columns are n/a instead).
swept() {
  name=$1 want=$2 inplace=$3
  shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  rows=$(grep -cv '^#' "$tmp/out")
  if [ $rc -eq 0 ] && [ "$rows" -eq "$want" ] && grep -q '^# Out of bounds values : 0 OK$' "$tmp/out" &&
    grep -v '^#' "$tmp/out" | awk -v ip="$inplace" '
      { if ($9 != 0) bad = 1
        if (ip == "na" && ($10 != "n/a" || $13 != "N/A")) bad = 1
        if (ip != "na" && $13 != 0) bad = 1 }
      END { exit bad }'; then
    ok "$name: $rows rows, all checks pass"
  else
    bad "$name (rc=$rc rows=$rows, want $want)"
  fi
}

# 0 .. 40000 B by 5: 8 sizes per dtype; -d all: 10 dtypes.
for np in 2 3; do
  d="-d float"
  rows=8
  [ $np -eq 3 ] && d="-d all" rows=80
  swept "sc_alltoall_perf, $np ranks" $rows 0 "$SC_RUN" -n $np --timeout 120 "$B/sc_alltoall_perf" \
    -b 0 -e 40K -f 5 -n 2 -w 1 $d
  for coll in gather scatter; do
    swept "sc_${coll}_perf -r $((np - 1)), $np ranks" $rows 0 "$SC_RUN" -n $np --timeout 120 \
      "$B/sc_${coll}_perf" -b 0 -e 40K -f 5 -n 2 -w 1 -r $((np - 1)) $d
  done
done
swept "sc_alltoall_perf -v, 3 ranks" 80 na "$SC_RUN" -n 3 --timeout 120 "$B/sc_alltoall_perf" -v \
  -b 0 -e 40K -f 5 -n 2 -w 1 -d all
swept "sc_alltoall_perf -v --skew 2 --seed 7, 4 ranks" 3 na "$SC_RUN" -n 4 --timeout 120 \
  "$B/sc_alltoall_perf" -v --skew 2 --seed 7 -b 64 -e 64K -f 32 -n 2 -w 1

# The columns: 3 ranks x 4-byte floats; size is the send buffer, count one block.
"$SC_RUN" -n 3 --timeout 60 "$B/sc_alltoall_perf" -b 100 -e 100 -n 1 -w 0 >"$tmp/out" 2>"$tmp/err"
set -- $(grep -v '^#' "$tmp/out")
if [ "${1:-}" = 96 ] && [ "${2:-}" = 8 ] && [ "${3:-}" = float ] && [ "${4:-}" = none ] &&
  [ "${5:-}" = -1 ]; then
  ok "all-to-all rounds 100 B to 96 B = 3 blocks of 8 floats"
else
  bad "all-to-all row '$*'"
fi

# -a compare: every algorithm's column timed and checked, best and auto-pick named.
for pair in "alltoall pairwise bruck hier" "gather binomial linear" "scatter binomial linear"; do
  set -- $pair
  coll=$1
  shift
  algos="$*"
  "$SC_RUN" -n 3 --timeout 120 "$B/sc_${coll}_perf" -a compare -b 96 -e 96K -f 32 -n 2 -w 1 \
    >"$tmp/out" 2>"$tmp/err"
  rc=$?
  head="^# +size +count +$(echo "$algos" | sed 's/ / +/g') +auto +best +auto-pick +auto/best\$"
  if [ $rc -eq 0 ] && grep -Eq "$head" "$tmp/out" && grep -q '^# Out of bounds values : 0 OK$' "$tmp/out" &&
    grep -v '^#' "$tmp/out" | awk -v names="$algos" '
      function num(x) { return x ~ /^[0-9]+(\.[0-9]+)?$/ }
      BEGIN { n = split(names, N, " "); for (i = 1; i <= n; i++) ok[N[i]] = 1 }
      { rows++
        for (c = 3; c <= 3 + n; c++) if (!num($c)) bad = 1
        if (!($(4 + n) in ok) || !($(5 + n) in ok) || !num($(6 + n)) || NF != 6 + n) bad = 1 }
      END { exit !(rows == 3 && !bad) }'; then
    ok "sc_${coll}_perf -a compare, 3 ranks"
  else
    bad "sc_${coll}_perf -a compare, 3 ranks (rc=$rc)"
  fi
done

# -v -a compare: the uneven all-to-all's three forms, hier on 2 emulated hosts
# x 2, each column timed and checked (auto's pick is not named: n/a).
SC_RANKS_PER_HOST=2 "$SC_RUN" -n 4 --timeout 120 "$B/sc_alltoall_perf" -v -a compare -b 96 \
  -e 96K -f 32 -n 2 -w 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && grep -Eq '^# +size +count +pairwise +sparse +hier +auto +best' "$tmp/out" &&
  grep -q '^# Out of bounds values : 0 OK$' "$tmp/out" &&
  grep -v '^#' "$tmp/out" | awk '
    function num(x) { return x ~ /^[0-9]+(\.[0-9]+)?$/ }
    { rows++
      for (c = 3; c <= 6; c++) if (!num($c)) bad = 1
      if ($7 !~ /^(pairwise|sparse|hier)$/ || $8 != "n/a") bad = 1 }
    END { exit !(rows == 3 && !bad) }'; then
  ok "sc_alltoall_perf -v -a compare, 2 hosts x 2"
else
  cat "$tmp/out" "$tmp/err" | tail -n 20
  bad "sc_alltoall_perf -v -a compare, 2 hosts x 2 (rc=$rc)"
fi

# -v -J: the matrix's settings, the rows, in place null (no such form).
py=""
for c in /usr/bin/python3 python3; do
  if "$c" -c 'import json' 2>/dev/null; then py=$c; break; fi
done
if [ -n "$py" ]; then
  if "$SC_RUN" -n 3 --timeout 60 "$B/sc_alltoall_perf" -v --seed 5 -b 8 -e 1K -f 4 -n 1 -w 0 \
    -J "$tmp/v.json" >"$tmp/out" 2>"$tmp/err" && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["binary"] == "sc_alltoall_perf" and d["nranks"] == 3, d
u = d["uneven"]
assert u["seed"] == 5 and u["skew"] == 1 and len(u["shares"]) == 3, u
assert all(abs(sum(row) - 1) < 1e-4 for row in u["shares"]), u
assert u["recv_max_over_mean"] >= 1, u
assert [r["size"] for r in d["rows"]] == [8, 32, 128, 512], d["rows"]
assert all(r["in_place"] is None and r["out_of_place"]["wrong"] == 0 for r in d["rows"]), d["rows"]
' "$tmp/v.json"; then
    ok "sc_alltoall_perf -v -J"
  else
    bad "sc_alltoall_perf -v -J"
  fi
  # The peers' copy of the matrix arithmetic gives the same counts.
  good=1
  for args in "2 --seed 1 --skew 1" "3 --seed 7 --skew 0" "8 --seed 12345678901 --skew 2" "13 --seed 0 --skew 1"; do
    # shellcheck disable=SC2086
    "$B/sc_alltoall_perf" --counts $args 0 8 1000 16777216 >"$tmp/c.txt" 2>"$tmp/err" &&
      "$py" "$top_srcdir/perf/compare/gloo_alltoall.py" --counts $args 0 8 1000 16777216 \
        >"$tmp/py.txt" 2>>"$tmp/err" && [ -s "$tmp/c.txt" ] && cmp -s "$tmp/c.txt" "$tmp/py.txt" ||
      { good=0; cp "$tmp/c.txt" "$tmp/out"; }
  done
  # Each rank's row sums to what it sends (the last case: 13 ranks).
  if [ $good -eq 1 ] && awk '{ e = $1 + 0; P = int(sqrt(NF - 1) + 0.5); if (P != 13) bad = 1
        for (i = 0; i < P; i++) { s = 0; for (j = 0; j < P; j++) s += $(2 + i * P + j); if (s != e) bad = 1 } }
      END { exit bad }' "$tmp/c.txt"; then
    ok "the -v count matrix: the C header and gloo_alltoall.py agree"
  else
    bad "the -v count matrix differs between the C header and gloo_alltoall.py"
  fi
else
  echo "SKIP-PART: no python3: -J and the peers' count matrix not checked"
fi

# Usage errors exit 2 before any communication is set up.
"$B/sc_alltoall_perf" -v --seed -1 >"$tmp/out" 2>"$tmp/err"
rc1=$?
"$B/sc_alltoall_perf" --skew 3 >"$tmp/out" 2>"$tmp/err"
rc2=$?
"$B/sc_alltoall_perf" --help >"$tmp/out" 2>"$tmp/err"
rc3=$?
if [ $rc1 -eq 2 ] && [ $rc2 -eq 2 ] && [ $rc3 -eq 0 ] && grep -q -- '--uneven' "$tmp/out" &&
  "$B/sc_gather_perf" --help | grep -q -- '-r, --root'; then
  ok "usage errors exit 2, --help names the options"
else
  bad "usage errors (rc=$rc1,$rc2,$rc3)"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
