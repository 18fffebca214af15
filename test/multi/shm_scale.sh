#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Many ranks over shared memory, pairs connected on first use (SC_CONNECT=lazy):
# 64 ranks run a ring all-reduce, checked on every rank against the closed
# form, and no rank maps a shared-memory segment but its own and its two ring
# neighbours' (SC_P2P=0: the point-to-point lane's own setup talks to more
# peers); then 128 ranks (SC_TEST_SHM_RANKS: 256 take over a minute on 2
# cores; 48 under SC_TEST_SAMPLE=1; skipped with under 24 MiB available per
# rank) create a communicator and run one 8-byte all-reduce with every
# process's address space capped (ulimit -v; not under a sanitizer, whose
# shadow memory reserves terabytes of it) and the memory of the job's
# segments bounded.
. "$top_srcdir/test/multi/lib.sh"
export SC_TIMEOUT_MS=120000 SC_TRANSPORT=shm SC_CONNECT=lazy

# lines LOG N: N "rank" lines, every one "ok 1"; prints the worst lines.
lines() {
  awk -v want="$2" '/^rank / { n++; if ($16 != 1) { bad++; print } }
    END { if (n != want || bad) { print n + 0 " of " want " ranks reported, " bad + 0 " failed"; exit 1 } }' "$1"
}

ring64() {
  SC_ALGO=ring SC_P2P=0 "$SC_RUN" -n 64 --timeout 200 "$MR/mr_shm_scale" 100003 \
    >"$tmpdir/r64" 2>&1
  rc=$?
  grep -v '^rank ' "$tmpdir/r64" | head -20
  [ "$rc" -eq 0 ] || return 1
  lines "$tmpdir/r64" 64 || return 1
  # segs: this rank's segment and its two neighbours', nothing else.
  awk '/^rank / && $12 > 3 { print "rank " $2 " maps " $12 " segments"; bad++ }
    /^rank / && $12 > max { max = $12 } END { print "most segments mapped by a rank: " max; exit bad > 0 }' \
    "$tmpdir/r64"
}
check "64 ranks, ring all-reduce of 100003 int32, at most 2 peers' segments mapped" ring64

many() {
  avail=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
  n=${SC_TEST_SHM_RANKS:-128}
  [ -n "${SC_TEST_SAMPLE:-}" ] && n=${SC_TEST_SHM_RANKS:-48}
  cap="ulimit -v 1048576"
  [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ] && cap=true
  if [ "$avail" -lt $((n * 24576)) ]; then
    echo "SKIP: $((avail / 1024)) MiB available, too little for $n ranks over shared memory"
    return 0
  fi
  # 1 GiB of address space per process: its own two segments' mappings
  # (66 MiB each at 256 ranks) and the peers' header pages fit many times.
  ($cap && "$SC_RUN" -n "$n" --timeout 300 "$MR/mr_shm_scale" 2) >"$tmpdir/many" 2>&1
  rc=$?
  grep -v '^rank ' "$tmpdir/many" | head -20
  [ "$rc" -eq 0 ] || return 1
  lines "$tmpdir/many" "$n" || return 1
  # The memory of the job's segments (seg_kb: each rank's own two): at most
  # 4 MiB per rank where every pair connected with full rings holds
  # 2 * 260 KiB per peer (130 MiB per rank at 256 ranks).
  awk -v n="$n" '/^rank / { kb += $18; if ($18 > max) max = $18 }
    END { printf "%d ranks: %.1f MiB of shared memory in all, %.2f MiB the most of a rank\n", n, kb / 1024, max / 1024
          exit !(kb < n * 4096) }' "$tmpdir/many"
}
check "many ranks (128; SC_TEST_SHM_RANKS), init and an 8-byte all-reduce in bounded memory" many
finish
