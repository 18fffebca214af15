#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The quick conformance suite at 64 ranks (SC_TEST_SCALE_RANKS; 24 under
# SC_TEST_SAMPLE=1) over tcp and over shm, pairs connected on first use (the
# default): sc_scale_probe --suite runs every collective and a point-to-point
# ring shift once, each checked on every rank against its closed form
# (perf/scale_suite.c). Each rank (then one rank alone) runs under a
# descriptor limit of 128 + n/2
# (ulimit -n, soft and hard; 160 at 64 ranks): the library keeps 128 of them
# apart, so the rest is too few for a connection to every peer: the cost
# model leaves out the algorithms that connect every pair
# (pairwise all-to-all, linear gather and scatter, direct all-gatherv) and
# the uneven all-to-all sends no empty block (its sparse form). Only the
# pairs the schedules use are connected: the descriptors a rank opened
# between creation and the suite's end are fewer than its peers, where
# every pair connected would take at least one per peer (a socket over tcp,
# a pidfd over shm; docs/SCALE.md). Over shm the clean job also logs no WARN
# line: at its end a rank's peers close their ends after its goodbye while
# the point-to-point lane's standing receive still waits on them, which is
# no failure (with that reported as one, 64 ranks logged 1-3 such lines in
# two runs of three).
. "$top_srcdir/test/multi/lib.sh"
n=${SC_TEST_SCALE_RANKS:-64}
[ -n "${SC_TEST_SAMPLE:-}" ] && n=${SC_TEST_SCALE_RANKS:-24}
lim=$((128 + n / 2))
probe="$top_builddir/sc_scale_probe"
# libtool's wrapper script runs bash and sed per rank: the program itself.
if [ -x "$top_builddir/.libs/sc_scale_probe" ] && [ "$(head -c 2 "$probe")" = '#!' ]; then
  probe="$top_builddir/.libs/sc_scale_probe"
  LD_LIBRARY_PATH="$top_builddir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
fi

suite() { # suite TRANSPORT [RANK]: every rank under the limit, or RANK alone
  cap="ulimit -Sn $lim && ulimit -Hn $lim"
  [ -n "${2:-}" ] && cap="if [ \"\$SC_RANK\" = $2 ]; then $cap; fi"
  # shellcheck disable=SC2016 # $0 and $@ are the rank's sh's
  env -u SC_CONNECT -u SC_A2A_ALGO -u SC_A2AV_ALGO SC_TRANSPORT="$1" SC_TIMEOUT_MS=120000 \
    "$SC_RUN" -n "$n" --timeout 300 sh -c "$cap"' && exec "$0" "$@"' \
    "$probe" --suite >"$tmpdir/$1" 2>"$tmpdir/$1.err"
  rc=$?
  grep -v '^{' "$tmpdir/$1" | head -5
  head -20 "$tmpdir/$1.err"
  [ "$rc" -eq 0 ] || return 1
  if [ "$1" = shm ] && grep -q ' SC WARN ' "$tmpdir/$1.err"; then
    echo "WARN lines in a job that succeeded: $(grep -c ' SC WARN ' "$tmpdir/$1.err")"
    return 1
  fi
  awk -v n="$n" '
    function num(key,   m) {
      if (!match($0, "\"" key "\":-?[0-9.]+")) return -1
      m = substr($0, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); return m + 0
    }
    /^\{/ { k++; if (num("ok") != 1 || num("suite") != 1) bad++
            f = num("fds_suite") - num("fds_init"); if (f > most) { most = f; who = num("rank") }
            if (num("suite_s") > slow) slow = num("suite_s") }
    END {
      printf "%d of %d ranks checked the suite; the most descriptors opened after creation: %d (rank %d), fewer than its %d peers; slowest suite %.3f s\n", k - bad, n, most, who, n - 1, slow
      exit !(k == n && !bad && most < n - 1)
    }' "$tmpdir/$1"
}
check "$n ranks over tcp under ulimit -n $lim: the quick suite, fewer descriptors opened than peers" suite tcp
check "$n ranks over shm under ulimit -n $lim: the quick suite, fewer descriptors opened than peers, no WARN line" suite shm
# The ranks agree on the least limit: with rank 3 alone under it, every rank
# leaves the same algorithms out (choices that differed would mismatch).
check "$n ranks over tcp, rank 3 alone under ulimit -n $lim: every rank keeps to its budget" suite tcp 3
finish
