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
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
tmpdir=$(mktemp -d)
trap 'rm -rf "$tmpdir"' EXIT
