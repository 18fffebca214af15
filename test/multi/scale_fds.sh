#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Rank 0's descriptors at 64 ranks over tcp, counted by the program itself
# (mr_fdcount reads /proc/self/fd after init and after one all-reduce). The
# bootstrap root runs in rank 0 and keeps no connection to the ranks once
# they have their table (test_bootstrap's test_root_descriptors bounds it
# while it serves), and the transport connects only the peers rank 0's calls
# use (SC_CONNECT=lazy, the default: the point-to-point lane's address
# exchange and the all-reduce, a few per doubling step). The liveness watch
# is a tree (SC_WATCH_FANOUT, default 8): rank 0 holds its listener and one
# socket per child, at most 9, not one per rank (a star would add 63 here).
# Rank 0 is bounded at 40 descriptors with the default two sockets per peer,
# both lanes and the watch, fewer than one per peer (21 without the watch,
# 31 with it).
. "$top_srcdir/test/multi/lib.sh"
n=64
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt 256 ]; then
  echo "skipped: the hard descriptor limit here is $hard"
  exit 77
fi
fds() {
  env -u SC_HEARTBEAT_MS -u SC_WATCH_FANOUT SC_TRANSPORT=tcp SC_TIMEOUT_MS=30000 \
    "$SC_RUN" -n $n --timeout 120 "$MR/mr_fdcount" 40
}
check "$n ranks over tcp, the liveness watch on: rank 0 holds at most 40 descriptors" fds
finish
