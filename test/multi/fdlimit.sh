#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Descriptors (lib/base/fdlimit.c): 12 ranks over tcp connected eagerly
# (SC_CONNECT=eager) hold about 70 descriptors each. A soft RLIMIT_NOFILE of
# 40 under a higher hard limit is raised at init and the job runs; a hard
# limit of 40 cannot be raised, and the ranks that run out fail with an error
# naming RLIMIT_NOFILE, what a communicator needs and the fix, every rank
# exiting within the timeout. Connected lazily (the default) each rank holds
# sockets only for the peers its calls use, and the same job runs under the
# hard limit of 40; 200 ranks run under a hard limit of 256.
. "$top_srcdir/test/multi/lib.sh"
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt 200 ]; then
  echo "skipped: the hard descriptor limit here is $hard"
  exit 77
fi
limited() { # limited SOFT HARD [TIMEOUT_MS]: mr_env on 12 ranks over tcp under those limits
  SC_DEBUG=INFO SC_TRANSPORT=tcp SC_CONNECT=${CONNECT:-eager} SC_TIMEOUT_MS=${3:-20000} \
    "$SC_RUN" -n 12 --timeout 90 \
    sh -c "ulimit -Sn $1 && ulimit -Hn $2 && exec \"\$0\"" "$MR/mr_env" >"$tmpdir/ranks" 2>&1
}
# The ranks write to their own file: check() sends each function's output to
# $tmpdir/out, and a second writer there would overwrite the lines counted.
raised() {
  limited 40 "$1"
  st=$?
  n=$(grep -c "soft limit raised from 40 to $1" "$tmpdir/ranks")
  grep -m 1 "soft limit raised" "$tmpdir/ranks"
  echo "exit $st; $n of 12 ranks raised the soft limit"
  tail -n 3 "$tmpdir/ranks"
  [ "$st" -eq 0 ] && [ "$n" -eq 12 ]
}
refused() {
  limited 40 40 5000 # the ranks that did not run out wait for the ones that did
  st=$?
  grep -m 1 "RLIMIT_NOFILE" "$tmpdir/ranks"
  tail -n 3 "$tmpdir/ranks"
  [ "$st" -ne 0 ] && grep -q "RLIMIT_NOFILE is 40 (hard limit 40" "$tmpdir/ranks" &&
    grep -q "a communicator here needs about" "$tmpdir/ranks"
}
lazy_fits() {
  CONNECT=lazy limited 40 40
  st=$?
  tail -n 3 "$tmpdir/ranks"
  [ "$st" -eq 0 ]
}
cap=$hard
if [ "$cap" = unlimited ] || [ "$cap" -gt 4096 ]; then cap=4096; fi
check "soft limit 40, hard $cap: raised at init, 12 ranks over tcp" raised "$cap"
check "hard limit 40: the ranks that run out name RLIMIT_NOFILE, the need and the fix" refused
check "hard limit 40, lazy connections: 12 ranks over tcp run" lazy_fits
# 200 ranks under a hard limit of 256 (rank 0 of a star watch alone would need
# 199 watch sockets): the probe's checked 8-byte and 1 MiB all-reduces. Not in
# the sanitizer runs (SC_TEST_SAMPLE=1): 200 sanitized processes, the same
# code as the 12-rank row.
many_fit() {
  SC_TRANSPORT=tcp SC_TIMEOUT_MS=120000 "$SC_RUN" -n 200 --timeout 240 \
    sh -c "ulimit -Sn 256 && ulimit -Hn 256 && exec \"\$0\"" "$top_builddir/sc_scale_probe" \
    >"$tmpdir/ranks" 2>&1
  st=$?
  tail -n 3 "$tmpdir/ranks"
  [ "$st" -eq 0 ] && [ "$(grep -c '"fds"' "$tmpdir/ranks")" -eq 200 ]
}
[ "${SC_TEST_SAMPLE:-0}" = 1 ] ||
  check "hard limit 256, lazy connections: 200 ranks over tcp run the probe" many_fit
finish
