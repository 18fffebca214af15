#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Rank 0's descriptors at 64 ranks over tcp, counted by the program itself
# (mr_fdcount reads /proc/self/fd after init and after one all-reduce). The
# bootstrap root runs in rank 0 and keeps no connection to the ranks once
# they have their table (test_bootstrap's test_root_descriptors bounds it
# while it serves), and the transport connects only the peers rank 0's calls
# use (SC_CONNECT=lazy, the default: the point-to-point lane's address
# exchange and the all-reduce, a few per doubling step). What rank 0 still
# holds per peer is the liveness watch's star, which this row leaves out
# (SC_HEARTBEAT_MS=-1): rank 0 is bounded at 40 descriptors with the default
# two sockets per peer and both lanes, fewer than one per peer.
. "$top_srcdir/test/multi/lib.sh"
n=64
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt 256 ]; then
  echo "skipped: the hard descriptor limit here is $hard"
  exit 77
fi
fds() {
  SC_TRANSPORT=tcp SC_HEARTBEAT_MS=-1 SC_TIMEOUT_MS=30000 \
    "$SC_RUN" -n $n --timeout 120 "$MR/mr_fdcount" 40
}
check "$n ranks over tcp: rank 0 holds at most 40 descriptors" fds
finish
