# SPDX-License-Identifier: BSD-3-Clause
# Helpers for the multi-rank test scripts (sourced).
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
SC_RUN="$top_builddir/sc-run"
MR="$top_builddir/test/multi"
passed=0
failed=0
check() { # check NAME CMD...: run CMD, count it
  name=$1
  shift
  start=$(date +%s)
  # The status is kept before anything else runs: inside "else", $? after
  # an assignment is that assignment's 0.
  "$@" >"$tmpdir/out" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    echo "PASS: $name ($(($(date +%s) - start)) s)"
  else
    failed=$((failed + 1))
    echo "FAIL: $name (exit $rc)"
    tail -n 40 "$tmpdir/out"
  fi
}
# device_runtime STANDIN: the device the device scripts run on. By default the
# stand-in at STANDIN (exported as SC_DEVRT_STANDIN); with SC_TEST_DEVICE=cuda
# (test/gpu/gpu_checks.sh, on a machine with a GPU) the library's CUDA
# runtime, with the stand-in unset. Returns 1 (the caller skips) when the
# stand-in is not built.
device_runtime() {
  if [ "${SC_TEST_DEVICE:-}" = cuda ]; then
    unset SC_DEVRT_STANDIN
    echo "device runtime: CUDA (SC_TEST_DEVICE=cuda)"
    return 0
  fi
  if [ ! -f "$1" ]; then
    echo "skipped: no device stand-in at $1"
    return 1
  fi
  SC_DEVRT_STANDIN=$1
  export SC_DEVRT_STANDIN
}
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
tmpdir=$(mktemp -d)
trap 'rm -rf "$tmpdir"' EXIT
