#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Point-to-point messaging (test/multi/mr_p2p.c, mr_p2p_inline.c, mr_p2p_alloc.c) over the transport
# SC_TRANSPORT names: 1 to 8 ranks, odd counts and non-powers of two; a rank
# killed mid-exchange; sc_comm_abort with a receive pending;
# SC_TIMEOUT_MS; SC_P2P_UNEXPECTED_BYTES; a sender that leaves at once, also
# before its receiver connected back; SC_P2P=0.
. "$top_srcdir/test/multi/lib.sh"
# UCX's worker setup costs seconds per rank on two shared cores: one size there.
sizes="1 2 3 5 8"
[ "${SC_TRANSPORT:-}" = ucx ] && sizes=3
# SC_TEST_SAMPLE=1 (the sanitizer runs): 2 and 5 ranks; the lane's threads and
# matching are the same code on any count, and the rows below run 2 and 3.
[ "${SC_TEST_SAMPLE:-0}" = 1 ] && sizes="2 5"
for n in $sizes; do
  check "p2p, n=$n" "$SC_RUN" -n "$n" --timeout 120 --label "$MR/mr_p2p" all
done
# Sizes around the frame's inline payload and the eager threshold, and
# several user threads calling at once (test/multi/mr_p2p_inline.c).
for n in $sizes; do
  check "p2p inline sizes and threads, n=$n" "$SC_RUN" -n "$n" --timeout 120 --label \
    "$MR/mr_p2p_inline"
done
# Warm ring shifts of 8 B, 88 B and 256 KiB allocate nothing per message (mr_p2p_alloc.c).
for n in $sizes; do
  check "p2p without allocation per message, n=$n" "$SC_RUN" -n "$n" --timeout 120 --label \
    "$MR/mr_p2p_alloc"
done
# The survivors notice the death through their lane (or the liveness watch);
# the timeout is the bound when neither does. sc-run reports the victim's
# signal: what counts is that every survivor said how it failed.
survivors() { # survivors N
  SC_TIMEOUT_MS=8000 "$SC_RUN" -n "$1" --grace 30 --timeout 60 --label "$MR/mr_p2p" death \
    >"$tmpdir/run" 2>&1
  cat "$tmpdir/run"
  [ "$(grep -c 'failed in' "$tmpdir/run")" -eq $(($1 - 1)) ] && ! grep -q FAIL "$tmpdir/run"
}
check "p2p, peer killed, n=2" survivors 2
check "p2p, peer killed, n=3" survivors 3
check "p2p, abort with a receive pending, n=2" "$SC_RUN" -n 2 --timeout 60 --label "$MR/mr_p2p" abort
check "p2p, unmatched calls time out, n=2" env SC_TIMEOUT_MS=1500 SC_BOOTSTRAP_TIMEOUT_MS=30000 "$SC_RUN" -n 2 --timeout 60 \
  --label "$MR/mr_p2p" timeout
check "p2p, unreceived messages past SC_P2P_UNEXPECTED_BYTES fail their sender's ops, n=2" \
  env SC_P2P_UNEXPECTED_BYTES=1048576 SC_TIMEOUT_MS=5000 "$SC_RUN" -n 2 --timeout 60 --label \
  "$MR/mr_p2p" flood
check "p2p, messages sent before the sender's destroy are received after it, n=3" \
  "$SC_RUN" -n 3 --timeout 60 --label "$MR/mr_p2p" leave
# The receiver is stopped (SIGSTOP) until the sender's destroy: over shared
# memory its first look at the pair comes after the sender's transport is
# gone, and what the sender left in the ring is still delivered. Over tcp the
# sender's connection needs the receiver's answer, so rank 1 is resumed first.
stopped() {
  "$SC_RUN" -n 3 --timeout 60 --label "$MR/mr_p2p" leave-stopped >"$tmpdir/stopped" 2>&1
  rc=$?
  cat "$tmpdir/stopped"
  [ "$rc" -eq 0 ] || return 1
  [ "${SC_TRANSPORT:-}" != shm ] || grep -q "sends done before rank 1 resumed" "$tmpdir/stopped"
}
check "p2p, messages from a sender that left before the pair was connected back, n=3" stopped
check "p2p off (SC_P2P=0), n=2" env SC_P2P=0 "$SC_RUN" -n 2 --timeout 60 --label "$MR/mr_p2p" off
# A rendezvous message's sender offers its buffer where the receiver can read
# it (shared memory, once the pair is set up), which takes it so and answers
# FIN; elsewhere (tcp, ucx) or with SC_P2P_READ=0 the receiver asks for the
# data with CTS. Five checked 1 MiB messages each way (a warm-up, three
# timed, one checked): over shm each rank's first may leave before its
# pair's setup is seen (SC_CONNECT=lazy), the others are read.
reads() { # reads [SC_P2P_READ]: how many offered buffers 2 ranks read
  "$SC_RUN" -n 2 --timeout 60 -x SC_DEBUG=TRACE -x SC_DEBUG_SUBSYS=COLL ${1:+-x SC_P2P_READ=$1} \
    "$top_builddir/sc_sendrecv_perf" -b 1M -e 1M -n 3 -w 1 -d uint8 >"$tmpdir/reads" 2>&1 &&
    grep -q '^# Out of bounds values : 0 OK$' "$tmpdir/reads" || return 1
  grep -c "offered buffer" "$tmpdir/reads" || true
}
lo=0 hi=0
[ "${SC_TRANSPORT:-}" = shm ] && lo=8 hi=10
offered() {
  n=$(reads) && [ "$n" -ge "$lo" ] && [ "$n" -le "$hi" ] && [ "$(reads 0)" = 0 ]
}
check "p2p rendezvous: offered buffers read $lo-$hi times, none with SC_P2P_READ=0" offered
# The suite with every rendezvous message asked for (on shm the path a device
# buffer takes, single-copy DATA after CTS).
[ "${SC_TRANSPORT:-}" = shm ] &&
  check "p2p, clear to send (SC_P2P_READ=0), n=3" env SC_P2P_READ=0 "$SC_RUN" -n 3 --timeout 120 \
    --label "$MR/mr_p2p" all
finish
