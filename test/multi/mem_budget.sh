#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Peak memory per rank as the job grows: 16, then 256 ranks over tcp (pairs
# connected on first use) create a communicator and run the probe's two
# all-reduces (perf/scale_probe.c: 8 bytes, then 1 MiB of float32, each
# checked on every rank). Every rank's peak resident memory (VmHWM) at 256
# ranks must stay within 25% of the largest at 16 ranks (the growth that what
# a rank keeps per peer and the cost model's replay of every rank add) and
# under 32 MiB: a memory bound, not a speed one. Skipped under
# SC_TEST_SAMPLE=1 (the sanitizer runs: their allocators and shadow memory are
# another budget).
. "$top_srcdir/test/multi/lib.sh"
export SC_TRANSPORT=tcp SC_CONNECT=lazy SC_TIMEOUT_MS=240000
unset SC_ALGO

if [ "${SC_TEST_SAMPLE:-0}" = 1 ]; then
  echo "skipped under SC_TEST_SAMPLE=1"
  exit 77
fi

# probe N: every rank's JSON line in $tmpdir/pN, all of them "ok":1.
probe() {
  "$SC_RUN" -n "$1" --timeout 300 "$top_builddir/sc_scale_probe" >"$tmpdir/p$1" || return 1
  awk -v want="$1" '/^\{/ { n++; if ($0 !~ /"ok":1/) bad++ }
    END { if (n != want || bad) { print n + 0 " of " want " ranks reported, " bad + 0 " wrong"; exit 1 } }' \
    "$tmpdir/p$1"
}

# The largest hwm_kb of a job's lines.
most() {
  sed -n 's/.*"hwm_kb":\([0-9]*\).*/\1/p' "$1" | sort -n | tail -1
}

budget() {
  probe 16 || return 1
  probe 256 || return 1
  base=$(most "$tmpdir/p16")
  big=$(most "$tmpdir/p256")
  limit=$((base * 125 / 100))
  echo "peak RSS per rank, the largest: $base KiB at 16 ranks, $big KiB at 256 (bound $limit KiB)"
  [ -n "$base" ] && [ -n "$big" ] || return 1
  [ "$big" -le "$limit" ] && [ "$big" -le 32768 ]
}
check "256 ranks over tcp: peak RSS per rank within 25% of 16 ranks' and under 32 MiB" budget
finish
