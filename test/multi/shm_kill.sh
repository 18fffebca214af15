#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A rank SIGKILLed in the middle of a 64 MiB all-reduce over shared memory:
# every survivor fails with SC_ERR_REMOTE naming a rank and its host, within
# the timeout (mr_shm checks that), and nothing of this job (no /dev/shm
# entry holding one of the ranks' pids) is left behind. Then rank 1
# killed at several moments around connection setup, the others stopped by
# sc-run a second later (as after any failure): still nothing left, and
# the job ends (sc-run stops it) well before its own timeout.
. "$top_srcdir/test/multi/lib.sh"
killed() { # killed N TRANSPORT
  SC_TRANSPORT=$2 SC_TIMEOUT_MS=30000 "$SC_RUN" -n "$1" --grace 60 --timeout 120 --label \
    "$MR/mr_shm" kill >"$tmpdir/run" 2>&1
  cat "$tmpdir/run"
  got=$(grep -c 'failed in' "$tmpdir/run")
  bad=$(grep -c 'FAIL' "$tmpdir/run")
  nothing_left "$1" && [ "$got" -eq $(($1 - 1)) ] && [ "$bad" -eq 0 ]
}
nothing_left() { # nothing_left N: /dev/shm holds none of the N ranks' pids
  # From sc-run's summary, which names every rank it started: a rank stopped
  # before its main() (a loaded machine) prints no pid of its own.
  pids=$(sed -n 's/^sc-run:   rank [0-9]* (pid \([0-9][0-9]*\)).*/\1/p' "$tmpdir/run")
  npids=$(echo "$pids" | grep -c .)
  left=""
  for p in $pids; do
    left="$left$(ls /dev/shm 2>/dev/null | grep -w -- "$p")"
  done
  [ -z "$left" ] || echo "left behind in /dev/shm: $left"
  [ "$npids" -eq "$1" ] || echo "expected $1 pids, got $npids"
  [ "$npids" -eq "$1" ] && [ -z "$left" ]
}
setupkill() { # setupkill N MS
  SC_TRANSPORT=shm SC_TIMEOUT_MS=10000 "$SC_RUN" -n "$1" --grace 1 --timeout 60 --label \
    "$MR/mr_shm" setupkill "$2" >"$tmpdir/run" 2>&1
  rc=$?
  cat "$tmpdir/run"
  grep -q 'rank 1 (pid [0-9]*) was killed by signal 9' "$tmpdir/run" || echo "rank 1 was not killed"
  nothing_left "$1" && grep -q 'rank 1 (pid [0-9]*) was killed by signal 9' "$tmpdir/run" &&
    [ $rc -ne 124 ]
}
check "rank killed mid 64 MiB all-reduce, n=2, shm" killed 2 shm
check "rank killed mid 64 MiB all-reduce, n=4, shm" killed 4 shm
check "rank killed mid 64 MiB all-reduce, n=3, auto" killed 3 auto
for ms in 0 10 30 60 100; do
  check "rank killed ${ms} ms into setup, n=4" setupkill 4 "$ms"
done
finish
