#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Device buffers between the ranks of one host over shared memory (CUDA IPC,
# transport/shm/shm_ipc.c), on the stand-in device runtime: 2, 3, 4 and 8
# processes sharing its one device. The transport alone (shm_ipc_procs): every
# pair at once, a cache that overflows, a buffer freed and reallocated, a
# device/host mismatch, a forged record, no device runtime. Then, where the
# executor passes device buffers to the transport (test/multi/mr_device),
# collectives on device buffers over SC_TRANSPORT=shm.
. "$top_srcdir/test/multi/lib.sh"
standin="$top_builddir/test/devfake/.libs/libsc_devfake.so"
if [ ! -f "$standin" ]; then
  echo "skipped: no stand-in device runtime ($standin)"
  exit 77
fi
P="$MR/shm_ipc_procs"
for n in 2 3 4 8; do
  check "$n ranks on one device: data" env SC_DEVRT_STANDIN="$standin" "$P" "$n" data
done
check "3 ranks, slow device copies" env SC_DEVRT_STANDIN="$standin" SC_DEVFAKE_DELAY_US=300 \
  "$P" 3 data
check "device send, host receive" env SC_DEVRT_STANDIN="$standin" "$P" 2 mismatch
check "host send, device receive" env SC_DEVRT_STANDIN="$standin" "$P" 2 mismatch2
check "forged record past the allocation" env SC_DEVRT_STANDIN="$standin" "$P" 2 garbage
check "forged handle" env SC_DEVRT_STANDIN="$standin" "$P" 2 badhandle
check "cancel during a slow device copy" env SC_DEVRT_STANDIN="$standin" \
  SC_DEVFAKE_DELAY_US=50000 "$P" 2 cancel
check "no device runtime" env -u SC_DEVRT_STANDIN "$P" 3 nodev
if [ -x "$MR/mr_device" ]; then
  for n in 2 3 4; do
    check "mr_device, $n ranks on one device, shm" env SC_DEVRT_STANDIN="$standin" \
      SC_TRANSPORT=shm "$SC_RUN" -n "$n" --timeout 300 "$MR/mr_device"
  done
  check "mr_device, 8 ranks on one device, shm, sample" env SC_DEVRT_STANDIN="$standin" \
    SC_TRANSPORT=shm SC_TIMEOUT_MS=60000 "$SC_RUN" -n 8 --timeout 300 "$MR/mr_device" --quick
  check "mr_device, 3 ranks, auto (shm inside the mux)" env SC_DEVRT_STANDIN="$standin" \
    SC_TRANSPORT=auto "$SC_RUN" -n 3 --timeout 300 "$MR/mr_device" --quick
else
  echo "SKIP: mr_device (not built)"
fi
finish
