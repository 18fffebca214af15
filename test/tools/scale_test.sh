#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# perf/scale.sh with sc_scale_probe on 2 and 4 ranks over tcp and shm, every
# pair connected at creation (SC_CONNECT=eager): every rank's line arrives
# with its all-reduces and the quick suite (--suite) checked, and the counts docs/SCALE.md models hold at
# least their eager floor: a tcp rank holds SC_NSOCKS (2) sockets to each
# peer for the collectives and as many for the point-to-point lane, and a
# shm rank's two segments hold a 256 KiB ring and a 4 KiB control page per
# peer. --nofile N puts each rank under a descriptor limit of N, soft and
# hard (a stand-in probe prints its limits); behind a wrapper script (as
# libtool's) the ranks run the program in .libs. Plus the usage errors (a
# missing bed among them). Open MPI is left out (--skip mpi).
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-..}
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/scale_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() {
  fail=$((fail + 1))
  echo "FAIL: $1"
  tail -n 20 "$tmp/out" "$tmp/err" 2>/dev/null | sed 's/^/  /'
}

SC_BUILD="$top_builddir" bash "$top_srcdir/perf/scale.sh" --min 2 --max 4 --connect eager \
  --skip mpi --suite --timeout 120 --out "$tmp/run" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ -f "$tmp/run/scale.csv" ] && [ -f "$tmp/run/scale.md" ]; then
  ok "scale.sh ran (exit 0, scale.csv and scale.md written)"
else
  bad "scale.sh (rc=$rc)"
fi

# row TP P: the CSV row of ours over TP at P ranks.
row() { grep "^sc,$1,eager,$2," "$tmp/run/scale.csv"; }
for tp in tcp shm; do
  for p in 2 4; do
    r=$(row $tp $p)
    okr=$(echo "$r" | cut -d, -f5)
    lines=$(grep -c '"ok":1' "$tmp/run/sc-$tp-eager-$p.jsonl" 2>/dev/null)
    # Columns 22-24: the suite's time and the descriptors after it.
    suite=$(echo "$r" | cut -d, -f22-24)
    if [ -n "$r" ] && [ "$okr" = "$p" ] && [ "$lines" = "$p" ] &&
      echo "$suite" | grep -Eq '^[0-9.]+,[0-9]+,[0-9]+$'; then
      ok "$tp, $p ranks: $p lines, every all-reduce and the suite checked (suite: $suite)"
    else
      bad "$tp, $p ranks: row '$r', $lines ok lines"
    fi
  done
done

# Column 21 is the worst rank's descriptors, 18 the rank's owned shared MiB.
for p in 2 4; do
  fds=$(row tcp $p | cut -d, -f21)
  floor=$((4 * (p - 1) + 1))
  if [ -n "$fds" ] && [ "$fds" -ge "$floor" ]; then
    ok "tcp, $p ranks: $fds descriptors at the worst rank (at least $floor)"
  else
    bad "tcp, $p ranks: '$fds' descriptors, expected at least $floor"
  fi
  owned=$(row shm $p | cut -d, -f18)
  if grep -q '"shm_owned_kb":-1' "$tmp/run/sc-shm-eager-$p.jsonl" 2>/dev/null; then
    # Reading a mapping's file through /proc/self/map_files takes CAP_SYS_ADMIN
    # (CAP_CHECKPOINT_RESTORE from Linux 5.9): the probe says -1 without it.
    ok "shm, $p ranks: shared memory owned not readable here (no access to /proc/self/map_files)"
  elif awk -v o="$owned" -v p="$p" 'BEGIN { exit !(o != "" && o + 0.05 >= 2 * 260 * (p - 1) / 1024) }'; then
    ok "shm, $p ranks: $owned MiB of shared memory owned (at least $(awk -v p="$p" 'BEGIN { printf "%.2f", 520 * (p - 1) / 1024 }'))"
  else
    bad "shm, $p ranks: '$owned' MiB of shared memory owned"
  fi
done

# A stand-in for the probe that reports its descriptor limits as the
# descriptor columns: soft as "fds", hard as "fds_init" (columns 21 and 19).
mkdir -p "$tmp/fake"
ln -s "$(cd "$top_builddir" && pwd)/sc-run" "$tmp/fake/sc-run"
cat >"$tmp/fake/sc_scale_probe" <<'EOF'
#!/bin/sh
echo "{\"lib\":\"sc\",\"rank\":$SC_RANK,\"init_s\":0,\"fds_init\":$(ulimit -Hn),\"fds\":$(ulimit -Sn),\"ok\":1}"
EOF
chmod +x "$tmp/fake/sc_scale_probe"
SC_BUILD="$tmp/fake" bash "$top_srcdir/perf/scale.sh" --min 2 --max 2 --transports tcp \
  --connect lazy --skip mpi --nofile 100 --timeout 60 --out "$tmp/nofile" >"$tmp/out" 2>"$tmp/err"
lim=$(grep '^sc,tcp,lazy,2,2,' "$tmp/nofile/scale.csv" | cut -d, -f19,21)
if [ "$lim" = "100,100" ]; then
  ok "--nofile 100: each rank's descriptor limit is 100, soft and hard"
else
  bad "--nofile 100: limits (hard,soft) '$lim'"
fi
# A build whose sc_scale_probe is a wrapper script (as libtool's) and whose
# program is in .libs: the ranks run the program, with .libs on the library
# path (the wrapper's line would say "ok":0).
mkdir -p "$tmp/wrap/.libs"
ln -s "$(cd "$top_builddir" && pwd)/sc-run" "$tmp/wrap/sc-run"
printf '#!/bin/sh\necho "{\\"rank\\":$SC_RANK,\\"init_s\\":0,\\"ok\\":0}"\n' >"$tmp/wrap/sc_scale_probe"
cat >"$tmp/wrap/.libs/sc_scale_probe" <<'EOF'
#!/bin/sh
case "$LD_LIBRARY_PATH" in */wrap/.libs*) ok=1 ;; *) ok=0 ;; esac
echo "{\"rank\":$SC_RANK,\"init_s\":0,\"ok\":$ok}"
EOF
chmod +x "$tmp/wrap/sc_scale_probe" "$tmp/wrap/.libs/sc_scale_probe"
SC_BUILD="$tmp/wrap" bash "$top_srcdir/perf/scale.sh" --min 2 --max 2 --transports tcp \
  --connect lazy --skip mpi --timeout 60 --out "$tmp/wrapped" >"$tmp/out" 2>"$tmp/err"
okr=$(grep '^sc,tcp,lazy,2,' "$tmp/wrapped/scale.csv" | cut -d, -f5)
if [ "$okr" = 2 ]; then
  ok "behind a wrapper script the ranks run .libs/sc_scale_probe with .libs on the library path"
else
  bad "wrapper script: $okr of 2 ranks ran the program in .libs"
fi
if bash "$top_srcdir/perf/scale.sh" --nofile 10 >"$tmp/out" 2>"$tmp/err"; then
  bad "--nofile 10 accepted"
elif grep -q "nofile must be" "$tmp/err"; then
  ok "--nofile below 64 refused"
else
  bad "--nofile 10: no message"
fi

if SC_NETBED_STATE_DIR="$tmp/none" bash "$top_srcdir/perf/scale.sh" --netbed=scnb-absent \
  >"$tmp/out" 2>"$tmp/err"; then
  bad "--netbed with no bed accepted"
elif [ $? -eq 2 ] && grep -q "bring the bed up" "$tmp/err"; then
  ok "--netbed with no bed: exit 2, says how to bring one up"
else
  bad "--netbed with no bed: wrong exit status or message"
fi
if bash "$top_srcdir/perf/scale.sh" --min 8 --max 4 >"$tmp/out" 2>"$tmp/err"; then
  bad "--max below --min accepted"
elif grep -q "max must be" "$tmp/err"; then
  ok "--max below --min refused"
else
  bad "--max below --min: no message"
fi

echo "scale_test: $pass passed, $fail failed"
[ $fail -eq 0 ]
