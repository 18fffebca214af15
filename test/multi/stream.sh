#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The stream forms (sc_*_on_stream) on the device stand-in (on a GPU with
# SC_TEST_DEVICE=cuda), over tcp and shm:
# stream order without host synchronization and every dense form on 1..4
# ranks, calls back to back on one stream and on two, sc_comm_abort
# releasing a waiting stream, a killed peer failing the communicator and
# releasing the survivors' streams, the gTop-k stream form against the blocking
# form on host copies (mr_stream.c says what each mode checks); the
# all-to-alls', gather's, scatter's and uneven all-gather's stream forms
# behind a slow stream (mr_coll_more --device).
. "$top_srcdir/test/multi/lib.sh"
device_runtime "$top_builddir/test/devfake/.libs/libsc_devfake.so" || exit 77
survivors() { # survivors N: every rank but the killed one reports its release
  SC_TIMEOUT_MS=60000 "$SC_RUN" -n "$1" --grace 90 --timeout 120 "$MR/mr_stream" death \
    >"$tmpdir/run" 2>&1
  cat "$tmpdir/run"
  got=$(grep -c 'failed with' "$tmpdir/run")
  bad=$(grep -c 'FAIL' "$tmpdir/run")
  [ "$got" -eq $(($1 - 1)) ] && [ "$bad" -eq 0 ]
}
for tp in tcp shm; do
  export SC_TRANSPORT=$tp
  for n in 1 2 3 4; do
    check "$tp: order and every form, n=$n" "$SC_RUN" -n "$n" --timeout 120 "$MR/mr_stream" order
    # Every stand-in stream op sleeps first: stream work lags far behind the host.
    check "$tp: back to back, two streams, n=$n" env SC_DEVFAKE_DELAY_US=200 "$SC_RUN" -n "$n" \
      --timeout 120 "$MR/mr_stream" chain
  done
  check "$tp: gTop-k stream form vs blocking host, n=3" "$SC_RUN" -n 3 --timeout 120 \
    "$MR/mr_stream" gtopk
  # The all-to-alls', gather's, scatter's and allgatherv's stream forms, many
  # in flight behind a slow stream (mr_coll_more --device runs every form).
  check "$tp: all-to-alls, gather, scatter, allgatherv behind a slow stream, n=3" \
    env SC_DEVFAKE_DELAY_US=200 "$SC_RUN" -n 3 --timeout 120 "$MR/mr_coll_more" --device --quick
  check "$tp: abort releases the stream, n=2" "$SC_RUN" -n 2 --timeout 60 "$MR/mr_stream" abort
  check "$tp: peer killed, n=2" survivors 2
  check "$tp: peer killed, n=3" survivors 3
done
finish
