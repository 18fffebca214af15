#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Rank 0's descriptors at 64 ranks over tcp, counted by the program itself
# (mr_fdcount reads /proc/self/fd after init and after one all-reduce). The
# bootstrap root runs in rank 0 and keeps no connection to the ranks once
# they have their table (test_bootstrap's test_root_descriptors bounds it
# while it serves). What rank 0 still holds per peer is the transport's mesh
# and the liveness watch's star: this row isolates the rest by running with
# one data socket per peer (SC_NSOCKS=1), no point-to-point connection
# (SC_P2P=0) and no watch (SC_HEARTBEAT_MS=-1), and bounds rank 0 at one
# descriptor per peer plus 24.
. "$top_srcdir/test/multi/lib.sh"
n=64
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt 256 ]; then
  echo "skipped: the hard descriptor limit here is $hard"
  exit 77
fi
fds() {
  SC_TRANSPORT=tcp SC_NSOCKS=1 SC_P2P=0 SC_HEARTBEAT_MS=-1 SC_TIMEOUT_MS=30000 \
    "$SC_RUN" -n $n --timeout 120 "$MR/mr_fdcount" $((n - 1 + 24))
}
check "$n ranks over tcp: rank 0 holds one descriptor per peer plus at most 24" fds
finish
