#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc_sendrecv_perf under sc-run, as perf_a2a_test.sh runs the all-to-all:
# checking on, 1 to 4 ranks (1: a rank that sends to itself), sizes from 0
# through 1 element and sizes no element size divides to past the 64 KiB
# eager limit of the point-to-point lane, every dtype on 3 ranks; both ways
# (-a group, -a isend) and -a compare's columns; busbw = algbw; JSON; usage
# errors; and perf/compare/alltoall_compare.sh --op sendrecv with our columns
# only (the peers need MPI and torch, and are not run here), its placement
# line and --bind. Needs a working
# library.
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-..}
SC_RUN="$top_builddir/sc-run"
B=$top_builddir
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/perf_sendrecv_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() {
  fail=$((fail + 1))
  echo "FAIL: $1"
  tail -n 20 "$tmp/out" "$tmp/err" 2>/dev/null | sed 's/^/  /'
}

# swept NAME WANT_ROWS CMD...: exit 0, "0 OK", WANT_ROWS rows whose
# out-of-place #wrong is 0 and busbw equals algbw, in place n/a.
swept() {
  name=$1 want=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  rows=$(grep -cv '^#' "$tmp/out")
  if [ $rc -eq 0 ] && [ "$rows" -eq "$want" ] && grep -q '^# Out of bounds values : 0 OK$' "$tmp/out" &&
    grep -v '^#' "$tmp/out" | awk '
      { if ($9 != 0 || $7 != $8 || $10 != "n/a" || $13 != "N/A") bad = 1 }
      END { exit bad }'; then
    ok "$name: $rows rows, all checks pass"
  else
    bad "$name (rc=$rc rows=$rows, want $want)"
  fi
}

# 0, 1, 7, 49, ... 117649 B: 8 sizes per dtype; the last one goes by rendezvous.
sizes="-b 0 -e 128K -f 7 -n 2 -w 1"
for np in 1 2 3 4; do
  d="-d uint8"
  rows=8
  [ $np -eq 3 ] && d="-d all" rows=80
  # shellcheck disable=SC2086
  swept "sc_sendrecv_perf $d, $np ranks" $rows "$SC_RUN" -n $np --timeout 120 \
    "$B/sc_sendrecv_perf" $sizes $d
done
# shellcheck disable=SC2086
swept "sc_sendrecv_perf -a isend -d float, 4 ranks" 8 "$SC_RUN" -n 4 --timeout 120 \
  "$B/sc_sendrecv_perf" -a isend $sizes -d float
# shellcheck disable=SC2086
swept "sc_sendrecv_perf -a group -d int64 over tcp, 3 ranks" 8 "$SC_RUN" -n 3 --timeout 120 \
  -x SC_TRANSPORT=tcp "$B/sc_sendrecv_perf" -a group $sizes -d int64

# The columns: 100 B of floats is 25 elements, no root, no op.
"$SC_RUN" -n 2 --timeout 60 "$B/sc_sendrecv_perf" -b 100 -e 100 -n 1 -w 0 >"$tmp/out" 2>"$tmp/err"
set -- $(grep -v '^#' "$tmp/out")
if [ "${1:-}" = 100 ] && [ "${2:-}" = 25 ] && [ "${3:-}" = float ] && [ "${4:-}" = none ] &&
  [ "${5:-}" = -1 ]; then
  ok "sendrecv: 100 B = 25 floats"
else
  bad "sendrecv row '$*'"
fi

# -a compare: both ways timed and checked, best one of them, auto the group.
"$SC_RUN" -n 3 --timeout 120 "$B/sc_sendrecv_perf" -a compare -b 1 -e 96K -f 32 -n 2 -w 1 \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && grep -Eq '^# +size +count +group +isend +auto +best +auto-pick +auto/best$' "$tmp/out" &&
  grep -q '^# Out of bounds values : 0 OK$' "$tmp/out" &&
  grep -v '^#' "$tmp/out" | awk '
    function num(x) { return x ~ /^[0-9]+(\.[0-9]+)?$/ }
    { rows++
      for (c = 3; c <= 5; c++) if (!num($c)) bad = 1
      if (($6 != "group" && $6 != "isend") || $7 != "group" || !num($8) || NF != 8) bad = 1 }
    END { exit !(rows == 4 && !bad) }'; then
  ok "sc_sendrecv_perf -a compare, 3 ranks"
else
  bad "sc_sendrecv_perf -a compare, 3 ranks (rc=$rc)"
fi

py=""
for c in /usr/bin/python3 python3; do
  if "$c" -c 'import json' 2>/dev/null; then py=$c; break; fi
done
if [ -n "$py" ]; then
  if "$SC_RUN" -n 2 --timeout 60 "$B/sc_sendrecv_perf" -a isend -b 8 -e 1K -f 4 -n 1 -w 0 \
    -J "$tmp/s.json" >"$tmp/out" 2>"$tmp/err" && "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["binary"] == "sc_sendrecv_perf" and d["collective"] == "sendrecv", d
assert d["nranks"] == 2 and d["algo"]["value"] == "isend", d
assert [r["size"] for r in d["rows"]] == [8, 32, 128, 512], d["rows"]
for r in d["rows"]:
    o = r["out_of_place"]
    assert r["in_place"] is None and o["wrong"] == 0 and o["busbw_GBps"] == o["algbw_GBps"], r
' "$tmp/s.json"; then
    ok "sc_sendrecv_perf -J"
  else
    bad "sc_sendrecv_perf -J"
  fi
else
  echo "SKIP-PART: no python3: -J not checked"
fi

# Usage errors exit 2: before any communication (a bad flag, device
# buffers), or on every rank before the first message (an unknown way).
"$B/sc_sendrecv_perf" -c 2 >"$tmp/out" 2>"$tmp/err"
rc1=$?
"$B/sc_sendrecv_perf" --mem device >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q 'host buffers only' "$tmp/err" || rc1="$rc1 (--mem device accepted)"
"$SC_RUN" -n 2 --timeout 60 "$B/sc_sendrecv_perf" -a ring -b 8 -e 8 >"$tmp/out" 2>"$tmp/err"
rc2=$?
grep -q 'expected group, isend or compare' "$tmp/err" || rc2="$rc2 (no reason)"
"$B/sc_sendrecv_perf" --help >"$tmp/out" 2>"$tmp/err"
rc3=$?
if [ "$rc1" = 2 ] && [ "$rc2" = 2 ] && [ $rc3 -eq 0 ] && grep -q -- '-a, --algo WAY' "$tmp/out" &&
  grep -q 'busbw = algbw x 1' "$tmp/out"; then
  ok "usage errors exit 2, --help names the ways"
else
  bad "usage errors (rc=$rc1,$rc2,$rc3)"
fi

# The comparison script's sendrecv mode, our two transports only. Its build
# directory's sc-run records its arguments, so that the tests see the
# placement the script asks for (--bind) reach every launch.
if command -v bash >/dev/null; then
  sb="$tmp/build" real="$(cd "$B" && pwd)"
  mkdir "$sb" && ln -s "$real/sc_sendrecv_perf" "$sb/sc_sendrecv_perf" &&
    printf '#!/bin/sh\necho "$*" >>"%s/args"\nexec "%s/sc-run" "$@"\n' "$tmp" "$real" >"$sb/sc-run" &&
    chmod +x "$sb/sc-run" || exit 1
  # The launches' --bind: one value, and every launch gave it.
  launches_bind() {
    [ -s "$tmp/args" ] && ! grep -v -- "^--bind $1 " "$tmp/args" >/dev/null
  }
  SC_BUILD="$sb" bash "$top_srcdir/perf/compare/alltoall_compare.sh" --op sendrecv -n 2 -b 8 -e 512 \
    -f 8 -I 4K -i 2 --skip mpi-shm,mpi-tcp,gloo -J "$tmp/c.json" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 0 ] && grep -q '^# sendrecv to rank + 1' "$tmp/out" &&
    grep -q 'busbw GB/s = size/time$' "$tmp/out" &&
    awk '/^## P=2$/ { t = 1; next } t && $1 ~ /^[0-9]+$/ {
           rows++
           # ours-shm, ours-tcp: a time, and busbw = size / time, within the
           # rounding of the printed time (half its last digit) and busbw (0.001)
           for (c = 2; c <= 6; c += 4) {
             if ($c == "n/a") { bad = 1; continue }
             dot = index($c, "."); half = 0.5 / 10 ^ (dot ? length($c) - dot : 0)
             lo = $1 / (($c + half) * 1e3) - 0.001
             hi = $c > half ? $1 / (($c - half) * 1e3) + 0.001 : 1e30
             if ($(c + 1) < lo || $(c + 1) > hi) bad = 1
           } }
         /^## ours/ { t = 0 }
         END { exit !(rows == 3 && !bad) }' "$tmp/out" &&
    grep -q '"op": "sendrecv"' "$tmp/c.json" &&
    grep -q '^# placement: ours bound round robin' "$tmp/out" && grep -q '"bind": "core"' "$tmp/c.json" &&
    launches_bind core; then
    ok "alltoall_compare.sh --op sendrecv, ours only"
  else
    bad "alltoall_compare.sh --op sendrecv (rc=$rc)"
  fi
  # --bind none: every launch gets it, the placement line and the JSON say so,
  # and ours still runs.
  rm -f "$tmp/args"
  SC_BUILD="$sb" bash "$top_srcdir/perf/compare/alltoall_compare.sh" --op sendrecv -n 2 -b 8 -e 8 \
    -I 4K -i 2 --bind none --skip mpi-shm,mpi-tcp,gloo -J "$tmp/c.json" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 0 ] && launches_bind none && [ "$(wc -l <"$tmp/args")" -eq 2 ] &&
    grep -q "^# placement: every library's ranks unbound" "$tmp/out" &&
    grep -q '"bind": "none"' "$tmp/c.json" && awk '/^## P=2$/ { t = 1; next }
      t && $1 == 8 && $2 != "n/a" && $6 != "n/a" { ok = 1 } END { exit !ok }' "$tmp/out"; then
    ok "alltoall_compare.sh --bind none"
  else
    bad "alltoall_compare.sh --bind none (rc=$rc)"
  fi
  SC_BUILD="$sb" bash "$top_srcdir/perf/compare/alltoall_compare.sh" --bind socket -n 2 >"$tmp/out" 2>&1
  rc=$?
  if [ $rc -eq 2 ] && grep -q 'must be core or none' "$tmp/out"; then
    ok "alltoall_compare.sh --bind socket: usage error"
  else
    bad "alltoall_compare.sh --bind socket (rc=$rc)"
  fi
else
  echo "SKIP-PART: no bash: alltoall_compare.sh --op sendrecv not run"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
