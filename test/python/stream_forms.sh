#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Comm's stream forms (stream=) on the device stand-in, over tcp and shm on
# 1..3 ranks: every form behind a gated late producer with the consumer
# enqueued right after, results against numpy, no host synchronisation
# counted (stream_forms.py says what each step checks). The torch backend's
# stream-ordered path on CUDA tensors runs where a GPU is (test/gpu).
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy
SC_DEVRT_STANDIN="$abs_builddir/test/devfake/.libs/libsc_devfake.so"
if [ ! -f "$SC_DEVRT_STANDIN" ]; then
  echo "skipped: the device stand-in $SC_DEVRT_STANDIN is not built"
  exit 77
fi
export SC_DEVRT_STANDIN
for tp in tcp shm; do
  for n in 1 2 3; do
    check "$tp: stream forms behind a late producer, stand-in, n=$n" env SC_TRANSPORT=$tp \
      "$SC_RUN" -n "$n" --timeout 120 --label "$PYTHON" "$PYT/stream_forms.py"
  done
done
# Every stand-in stream op sleeps first: stream work lags far behind the host.
check "stream forms, slow stand-in streams, n=2" env SC_DEVFAKE_DELAY_US=200 \
  "$SC_RUN" -n 2 --timeout 200 --label "$PYTHON" "$PYT/stream_forms.py"
finish
