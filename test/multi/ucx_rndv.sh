#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The library's UCX rendezvous defaults (transport/ucx/ucx_setup.c): with
# UCX_RNDV_THRESH unset, every rank's UCP configuration gets RNDV_THRESH=256k
# where the job has no more ranks than the host has CPUs and 64k where it has
# more (logged at INFO), and no second context for other hosts opens: the
# root is on loopback here (ucx_netbed.sh checks the eager net lane between
# hosts); with it set, the user's value goes to UCX untouched: no
# such log line, and a value UCX cannot parse fails the communicator's
# creation naming UCX's settings, where the library's own default would
# have hidden it.
. "$top_srcdir/test/multi/lib.sh"
export SC_TRANSPORT=ucx SC_DEBUG=INFO SC_DEBUG_SUBSYS=NET
unset UCX_RNDV_THRESH
perf() { # perf N [VAR=VALUE]: an N-rank 64 KiB all-reduce, checked
  pn=$1
  shift
  env "$@" "$SC_RUN" -n "$pn" --timeout 120 "$top_builddir/sc_allreduce_perf" -b 64K -e 64K \
    -n 5 -w 1 -c 1
}
default_set() { # default_set N THRESHOLD
  perf "$1" >"$tmpdir/run" 2>&1 || return 1
  # Every rank sets it, and no element is wrong, out of place or in place.
  [ "$(grep -c "ucx: rendezvous from $2 bytes between ranks of one host, $2 between hosts.*root is on loopback" \
    "$tmpdir/run")" -eq "$1" ] &&
    [ "$(grep -c "ucx: rank . has endpoints.*$(($1 - 1)) on this host, 0 on other hosts; 0 through" \
      "$tmpdir/run")" -eq "$1" ] &&
    [ "$(awk '$1 == 65536 && $9 == 0 && $13 == 0' "$tmpdir/run" | wc -l)" -eq 1 ]
}
user_kept() {
  perf 2 UCX_RNDV_THRESH=32k >"$tmpdir/run" 2>&1 || return 1
  ! grep -q 'ucx: rendezvous from' "$tmpdir/run" &&
    [ "$(grep -c 'inf between hosts' "$tmpdir/run")" -eq 0 ]
}
user_bad() {
  perf 2 UCX_RNDV_THRESH=not-a-size >"$tmpdir/run" 2>&1 && return 1
  grep -q 'reading UCX_\* settings' "$tmpdir/run"
}
cpus=$(getconf _NPROCESSORS_ONLN)
if [ "$cpus" -ge 2 ]; then
  check "UCX_RNDV_THRESH unset, 2 ranks on $cpus CPUs: 256k on both, one context, results right" \
    default_set 2 256k
fi
if [ "$cpus" -le 7 ]; then
  check "UCX_RNDV_THRESH unset, $((cpus + 1)) ranks on $cpus CPUs: 64k on each, results right" \
    default_set $((cpus + 1)) 64k
else
  echo "SKIP: more ranks than this host's $cpus CPUs would be $((cpus + 1)) processes"
fi
check "UCX_RNDV_THRESH=32k: the user's, no default logged, one context" user_kept
check "UCX_RNDV_THRESH=not-a-size: UCX refuses it, the library reports it" user_bad
finish
