#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Sets up, builds and runs the whole test suite (make check), then prints
# the totals as one line. SC_CHECK_JOBS: tests run at once (default: the
# cores + 1; many tests mostly wait, on deadlines, peers or emulated links).
set -e
cd "$(dirname "$0")/.."
sh tools/build.sh
cd build
rc=0
make -j"${SC_CHECK_JOBS:-$(($(nproc) + 1))}" check >check.out 2>&1 || rc=$?
cat check.out
[ $rc -ne 0 ] && sh ../tools/show_failed.sh .
if [ $rc -eq 0 ]; then
  if top_srcdir=.. sh ../test/install_check.sh; then pass_extra=1; else rc=1; fail_extra=1; fi
fi
pass=$(sed -n 's/^# PASS: *//p' check.out | tail -n1)
fail=$(sed -n 's/^# FAIL: *//p' check.out | tail -n1)
err=$(sed -n 's/^# ERROR: *//p' check.out | tail -n1)
echo "$(( ${pass:-0} + ${pass_extra:-0} )) passed, $(( ${fail:-0} + ${err:-0} + ${fail_extra:-0} )) failed"
exit $rc
