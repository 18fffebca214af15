#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The verbs transport's data path on a machine without RDMA: the multi-rank
# suite with SC_TRANSPORT=verbs over test/multi/verbs_fake_ibverbs.c, a stand-in
# libibverbs.so.1 found first through LD_LIBRARY_PATH (RDMA writes become
# process_vm_writev into the peer, immediates datagrams). It checks the
# transport's protocol, striping, registration, completions and failure paths,
# not an HCA's behaviour or speed: test/multi/verbs-*.sh do that where a real
# device exists.
. "$top_srcdir/test/multi/lib.sh"
lib="$top_builddir/test/multi/.libs/libverbs_fake_ibverbs.so"
if [ ! -f "$lib" ]; then
  echo "skipped: $lib not built"
  exit 77
fi
mkdir "$tmpdir/fakeib"
ln -s "$(cd "$(dirname "$lib")" && pwd)/libverbs_fake_ibverbs.so" "$tmpdir/fakeib/libibverbs.so.1"
LD_LIBRARY_PATH="$tmpdir/fakeib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SC_TRANSPORT=verbs
# The stand-in's costs are no HCA's, so its calibration (SC_TUNE=auto calibrates
# over verbs on one host) would only slow every communicator's creation: the
# suites run on the defaults; allreduce_algos.sh still checks that auto calibrates.
SC_TUNE=model
export LD_LIBRARY_PATH SC_TRANSPORT SC_TUNE
lists_fake() {
  "$top_builddir/sc-info" | tee "$tmpdir/info"
  grep -q '^  fake0:1 ACTIVE, Ethernet (RoCE), 100.0 Gbit/s, MTU 4096' "$tmpdir/info"
}
check "sc-info lists the fake device" lists_fake
# The suites that reach different transport paths: every collective and
# size, the all-to-alls' many peers at once, variable-size sparse messages, a
# peer's death, the launchers. The all-reduce algorithm sweep and fusion post
# the same kinds of messages and run over tcp, shm and ucx (they took 220 of
# this script's 320 s); VERBS_FAKE_SUITES=all adds them back.
# VERBS_FAKE_SUITES narrows the list: CI's ASan stage (tools/sanitize.sh).
suites=${VERBS_FAKE_SUITES:-collectives coll_more sparse peer_death env_launchers}
[ "$suites" = all ] && suites="collectives coll_more allreduce_algos sparse fusion peer_death env_launchers"
# The sweeps of dtypes and rank counts (coll_more, allreduce_algos) run their
# sample (SC_TEST_SAMPLE=1): their full sweeps ran over tcp and shm, and what
# is verbs' own is the transport under them.
for s in $suites; do
  check "$s over verbs (fake provider)" env SC_TEST_SAMPLE=1 sh "$top_srcdir/test/multi/$s.sh"
done
# The variants on 4 ranks (3 for the uneven stripes) rather than the whole
# collectives.sh again: the full suite above already ran once over this
# provider, and three more passes would take the script past its watchdog
# on a loaded machine.
check "collectives n=4, SC_IB_QPS_PER_PEER=4 (striped)" \
  env SC_IB_QPS_PER_PEER=4 "$SC_RUN" -n 4 --timeout 300 --label "$MR/mr_collectives"
check "collectives n=3, SC_IB_QPS_PER_PEER=3 (uneven stripes)" \
  env SC_IB_QPS_PER_PEER=3 "$SC_RUN" -n 3 --timeout 300 --label "$MR/mr_collectives"
check "collectives n=4, SC_IB_REG_CACHE_BYTES=0" \
  env SC_IB_REG_CACHE_BYTES=0 "$SC_RUN" -n 4 --timeout 300 --label "$MR/mr_collectives"
# Two ranks calling all-reduces of 1000 and 999 elements: the clear-to-send
# carries the receive's print, so the sender refuses a message of another
# call before any byte moves, and both ranks fail with SC_ERR_MISMATCH naming
# both calls (a rank may learn of it from the liveness watch's relay).
count_mismatch() {
  # Each rank stays until both have reported (MR_REPORT_DIR), at most
  # SC_TIMEOUT_MS + 1 s, so that neither reports the other's exit.
  mkdir "$tmpdir/mm_reported"
  SC_TIMEOUT_MS=3000 SC_BOOTSTRAP_TIMEOUT_MS=30000 SC_DEBUG=NONE MR_REPORT_DIR="$tmpdir/mm_reported" "$SC_RUN" -n 2 --grace 30 \
    --timeout 60 "$top_builddir/test/failure/fail_mismatch" count report >"$tmpdir/mm" 2>&1
  cat "$tmpdir/mm"
  [ "$(grep -c '^rank [01]: ranks called mismatched collectives in' "$tmpdir/mm")" -eq 2 ] &&
    [ "$(grep '^rank [01]: ranks called mismatched collectives in' "$tmpdir/mm" |
      grep -c 'allreduce #1 (count 1000, .*allreduce #1 (count 999,\|allreduce #1 (count 999, .*allreduce #1 (count 1000,')" -eq 2 ]
}
check "count mismatch: SC_ERR_MISMATCH on both ranks, naming both calls" count_mismatch
# Without the liveness watch a killed peer is noticed through its closed side
# channel, or, for a survivor with a send to it on the wire, through the queue
# pair's retry counter: every survivor fails with SC_ERR_REMOTE naming it, long
# before the 60 s timeout.
no_watch_kill() {
  SC_HEARTBEAT_MS=-1 SC_TIMEOUT_MS=60000 "$SC_RUN" -n 3 --grace 90 --timeout 120 --label \
    "$MR/mr_peer_death" kill >"$tmpdir/nw" 2>&1
  cat "$tmpdir/nw"
  [ "$(grep -Ec 'failed in [0-4]\.[0-9]+ s with: .*peer 1( closed its connection|: transport retry counter exceeded)' "$tmpdir/nw")" -eq 2 ] &&
    [ "$(grep -c 'FAIL' "$tmpdir/nw")" -eq 0 ]
}
check "peer killed, SC_HEARTBEAT_MS=-1: survivors fail at once" no_watch_kill
finish
