#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --mem device in the perf programs. Without any device runtime (no stand-in,
# CUDA_VISIBLE_DEVICES empty) each program must refuse clearly: exit status 2
# and "--mem device: no CUDA device (built with CUDA: yes|no)", no crash.
# With the stand-in device runtime (test/devfake: device memory the host
# cannot touch) each sc_*_perf runs on 2 and 3 ranks with its own check on:
# no wrong element, the rank lines naming the stand-in, and sc_gtopk_perf
# --select finding on the device exactly what the host finds.
. "$top_srcdir/test/multi/lib.sh"
STANDIN="$top_builddir/test/devfake/.libs/libsc_devfake.so"
if [ ! -f "$STANDIN" ]; then
  echo "skipped: the device stand-in $STANDIN is not built"
  exit 77
fi
B=$top_builddir
COLLS="allreduce reduce_scatter allgather broadcast reduce alltoall gather scatter"

# refuses NAME CMD...: exit 2 and the message, with no device runtime at all.
refuses() {
  name=$1
  shift
  env -u SC_DEVRT_STANDIN CUDA_VISIBLE_DEVICES= "$@" >"$tmpdir/out" 2>&1
  rc=$?
  if [ "$rc" -eq 2 ] && grep -q -- "--mem device: no CUDA device (built with CUDA: \(yes\|no\))" "$tmpdir/out"; then
    passed=$((passed + 1))
    echo "PASS: $name refuses without a device: $(tail -n 1 "$tmpdir/out")"
  else
    failed=$((failed + 1))
    echo "FAIL: $name without a device: exit $rc, expected 2 and the message"
    tail -n 20 "$tmpdir/out"
  fi
}
for c in $COLLS; do
  refuses "sc_${c}_perf --mem device" "$B/sc_${c}_perf" --mem device -b 8 -e 8
done
refuses "sc_gtopk_perf --mem device" "$B/sc_gtopk_perf" --mem device -n 1000 -k 10
refuses "sc_gtopk_perf --select --mem device" "$B/sc_gtopk_perf" --select --mem device -n 1000
refuses "sc_kernel_perf --mem device" "$B/sc_kernel_perf" --mem device -b 1K -e 1K
check "--mem nonsense is a usage error" sh -c '"$1" --mem gpu; test $? -eq 2' sh "$B/sc_allreduce_perf"

# The torch comparisons need a GPU: where torch sees none they must say so
# and stop cleanly (this is all of them that runs on a machine without one).
PYTHON=:
[ -f "$B/test/python/pyenv.sh" ] && . "$B/test/python/pyenv.sh"
if [ "$PYTHON" != ":" ] && "$PYTHON" -c "import sys, torch; sys.exit(torch.cuda.is_available())" \
  >/dev/null 2>&1; then
  for s in topk allreduce; do
    check "compare/torch_gpu_$s.py without a GPU says skipped" sh -c \
      '"$1" "$2" --build "$3" | grep -q "^skipped: no CUDA device"' sh "$PYTHON" \
      "$top_srcdir/perf/compare/torch_gpu_$s.py" "$B"
  done
else
  echo "(the torch comparisons not run: no torch here, or torch has a GPU and they would time it)"
fi

export SC_DEVRT_STANDIN="$STANDIN"

# swept CMD...: the run succeeded, checked every size (#wrong 0 everywhere,
# "OK"), and its ranks worked on the stand-in's memory.
swept() {
  "$@" >"$tmpdir/sweep" 2>&1 || { cat "$tmpdir/sweep"; return 1; }
  cat "$tmpdir/sweep"
  grep -q "Out of bounds values : 0 OK" "$tmpdir/sweep" &&
    grep -q "device  0 \[devfake\]" "$tmpdir/sweep"
}
for n in 2 3; do
  for c in $COLLS; do
    check "sc_${c}_perf --mem device, $n ranks" swept "$SC_RUN" -n "$n" --timeout 120 \
      "$B/sc_${c}_perf" --mem device -b 8 -e 256K -f 8 -n 2 -w 1 -c 1
  done
done
# Every stream op of the stand-in delayed: a copy or a result read before its
# wait would show as wrong elements.
check "sc_allgather_perf --mem device, 3 ranks, slow stand-in streams" swept env \
  SC_DEVFAKE_DELAY_US=300 "$SC_RUN" -n 3 --timeout 120 "$B/sc_allgather_perf" --mem device \
  -b 8 -e 64K -f 32 -n 2 -w 1 -c 1
# The uneven all-to-all's most loaded rank receives more than the size: its
# device buffer and copies are sized by the count matrix.
check "sc_alltoall_perf -v --mem device, 3 ranks" swept "$SC_RUN" -n 3 --timeout 120 \
  "$B/sc_alltoall_perf" -v --skew 2 --mem device -b 8 -e 256K -f 8 -n 2 -w 1 -c 1
check "sc_allreduce_perf --mem device -d all -o all, 2 ranks" swept "$SC_RUN" -n 2 --timeout 200 \
  "$B/sc_allreduce_perf" --mem device -b 8 -e 4K -f 16 -n 1 -w 0 -d all -o all
check "sc_reduce_scatter_perf --mem device -d all -o all, 3 ranks" swept "$SC_RUN" -n 3 \
  --timeout 200 "$B/sc_reduce_scatter_perf" --mem device -b 24 -e 6K -f 16 -n 1 -w 0 -d all -o all

# -a compare on device buffers: every algorithm checked (no WRONG line),
# exit 0 (an unsupported algorithm is n/a, not a failure).
compared() {
  "$@" >"$tmpdir/cmp" 2>&1 || { cat "$tmpdir/cmp"; return 1; }
  cat "$tmpdir/cmp"
  ! grep -q "WRONG" "$tmpdir/cmp" && grep -q "\[devfake\]" "$tmpdir/cmp"
}
check "sc_allreduce_perf -a compare --mem device, 3 ranks" compared "$SC_RUN" -n 3 --timeout 200 \
  "$B/sc_allreduce_perf" -a compare --mem device -b 1K -e 256K -f 16 -n 2 -w 1

# sc_gtopk_perf: every algorithm's result checked against its reference
# (the last column, wrong, must be 0 on every row).
gtopk_ok() {
  "$@" >"$tmpdir/g" 2>&1 || { cat "$tmpdir/g"; return 1; }
  cat "$tmpdir/g"
  grep -q "buffers in device memory (devfake" "$tmpdir/g" &&
    awk '$1 ~ /^(gtopk|tree|allgather|dense)$/ { rows++; if ($NF != "0") bad++ }
         END { exit !(rows == 4 && bad == 0) }' "$tmpdir/g"
}
for n in 2 3; do
  check "sc_gtopk_perf --mem device, $n ranks" gtopk_ok "$SC_RUN" -n "$n" --timeout 200 \
    "$B/sc_gtopk_perf" --mem device -n 65536 -k 128 -w 1 -i 2 -c 1
done

# --select: exit 0 only if the device's exact selection is the host's.
select_ok() {
  "$@" >"$tmpdir/s" 2>&1 || { cat "$tmpdir/s"; return 1; }
  cat "$tmpdir/s"
  grep -q "device memory (devfake)" "$tmpdir/s"
}
check "sc_gtopk_perf --select --mem device, float" select_ok "$B/sc_gtopk_perf" --select \
  --mem device -n 200000 --iters 2
check "sc_gtopk_perf --select --mem device, half" select_ok "$B/sc_gtopk_perf" --select \
  --mem device -n 100000 --iters 1 --dtype half

# sc_kernel_perf: a row per size, dtype (10) and op (5), each "ok". Here the
# reference and the kernels under test are the same CPU code (the stand-in
# emulates its kernels with them), so these rows check the tool itself: its
# rows, its exit status, and, with every stand-in stream op delayed, that it
# reads a result back only after the kernel ran (a result read early would
# differ from the CPU's). The kernels themselves are checked on a GPU
# (test/gpu/gpu_checks.sh, and test_cuda_kernels). Odd sizes leave a scalar
# tail after the 16-byte vectors.
kernels_ok() {
  "$@" >"$tmpdir/k" 2>&1 || { cat "$tmpdir/k"; return 1; }
  cat "$tmpdir/k"
  awk -v want="$KROWS" '!/^#/ { rows++; if ($NF != "ok") bad++ }
       END { exit !(rows == want && bad == 0) }' "$tmpdir/k"
}
KROWS=100 check "sc_kernel_perf --mem device, 2 sizes x 10 dtypes x 5 ops, slow streams" \
  kernels_ok env SC_DEVFAKE_DELAY_US=300 "$B/sc_kernel_perf" --mem device -b 1000 -e 64008 -f 64 \
  -n 2 -w 1
KROWS=5 check "sc_kernel_perf --mem host -d bfloat16" kernels_ok env -u SC_DEVRT_STANDIN \
  "$B/sc_kernel_perf" -b 4K -e 4K -n 2 -w 1 -d bfloat16
check "sc_kernel_perf -d nonsense is a usage error" sh -c \
  '"$1" -d nonsense 2>/dev/null; test $? -eq 2' sh "$B/sc_kernel_perf"
finish
