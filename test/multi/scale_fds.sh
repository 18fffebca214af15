#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Rank 0's descriptors at 64 ranks over tcp: the bootstrap root (in rank 0)
# holds no connection to every rank, so after init and one all-reduce rank 0
# holds a few dozen descriptors, not one per rank (mr_fdcount counts
# /proc/self/fd itself). A bound of 40 leaves room for the transport's
# sockets to the ranks the all-reduce talks to and the library's own.
. "$top_srcdir/test/multi/lib.sh"
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt 256 ]; then
  echo "skipped: the hard descriptor limit here is $hard"
  exit 77
fi
fds64() {
  SC_TRANSPORT=tcp SC_TIMEOUT_MS=30000 "$SC_RUN" -n 64 --timeout 60 "$MR/mr_fdcount" 40
}
check "64 ranks over tcp: rank 0 holds at most 40 descriptors" fds64
finish
