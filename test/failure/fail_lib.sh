# SPDX-License-Identifier: BSD-3-Clause
# Helpers for the failure-table scripts (sourced): test/multi/lib.sh's
# check/finish, plus the programs' paths.
. "$top_srcdir/test/multi/lib.sh"
FAIL="$top_builddir/test/failure"
# every_rank N FILE: N RESULT lines, no FAIL line
every_rank() {
  got=$(grep -c 'RESULT rank' "$2")
  bad=$(grep -c 'FAIL' "$2")
  [ "$got" -eq "$1" ] && [ "$bad" -eq 0 ]
}
