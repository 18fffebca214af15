#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# What a mismatch does WITHOUT SC_CHECK_MISMATCH (the default), on 2 and 3
# ranks over tcp and shm, with SC_TIMEOUT_MS=1500. Observed and asserted:
#  - op (sum vs max) and root (broadcast from 0 vs from 1): every rank
#    returns SC_SUCCESS: the results are silently wrong (and a root mismatch
#    leaves stray messages for the next operation);
#  - count, dtype, kind, a skipped call, sparse k: at least one rank fails,
#    each with SC_ERR_REMOTE (a length check: "sent a 4000-byte message where
#    3996 bytes were expected", a peer that reset or closed the connection,
#    a sparse count above its bound) or SC_ERR_TIMEOUT; some ranks may
#    return SC_SUCCESS (the one that only sent); never SC_ERR_MISMATCH;
#  - every rank returns within SC_TIMEOUT_MS + 1.5 s.
# Each rank lingers before it exits, so that its peers report the mismatch
# and not its exit: until every rank has reported (MR_REPORT_DIR), at most
# SC_TIMEOUT_MS + 1 s.
. "$top_srcdir/test/multi/lib.sh"
PROG="$top_builddir/test/failure/fail_mismatch"
TMO=1500
outcome() { # outcome TP N SCENARIO silent|fails
  rep=$(mktemp -d "$tmpdir/reported.XXXXXX")
  SC_TRANSPORT=$1 SC_TIMEOUT_MS=$TMO SC_DEBUG=NONE MR_REPORT_DIR=$rep \
    "$SC_RUN" -n "$2" --grace 30 --timeout 60 "$PROG" "$3" report >"$tmpdir/run" 2>&1
  rc=$?
  cat "$tmpdir/run"
  [ "$rc" -eq 0 ] || return 1
  [ "$(grep -c '^rank [0-9]*: ' "$tmpdir/run")" -eq "$2" ] || return 1
  # "rank R: RESULT in T s: ..." -> every rank within the bound.
  awk -v lim="$(echo "$TMO" | awk '{print $1 / 1000 + 1.5}')" '
    /^rank [0-9]+: / { t = $0; sub(/.* in /, "", t); sub(/ s:.*/, "", t);
                       if (t + 0 > lim) { print "over the bound: " $0; bad = 1 } }
    END { exit bad }' "$tmpdir/run" || return 1
  ok=$(grep -c '^rank [0-9]*: success in' "$tmpdir/run")
  remote=$(grep -c '^rank [0-9]*: remote peer failed' "$tmpdir/run")
  tmo=$(grep -c '^rank [0-9]*: timed out in' "$tmpdir/run")
  echo "$1 n=$2 $3: success $ok, SC_ERR_REMOTE $remote, SC_ERR_TIMEOUT $tmo of $2 ranks" |
    tee -a "$tmpdir/summary"
  if [ "$4" = silent ]; then
    [ "$ok" -eq "$2" ]
  else
    [ "$ok" -lt "$2" ] && [ $((ok + remote + tmo)) -eq "$2" ]
  fi
}
for tp in tcp shm; do
  for n in 2 3; do
    for s in op root; do
      check "$tp n=$n: $s mismatch unchecked: every rank succeeds (wrong data)" \
        outcome "$tp" "$n" "$s" silent
    done
    for s in count dtype kind missing sparse; do
      check "$tp n=$n: $s mismatch unchecked: REMOTE or TIMEOUT, bounded" \
        outcome "$tp" "$n" "$s" fails
    done
  done
done
echo "# what each unchecked mismatch did:"
cat "$tmpdir/summary"
finish
