#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The long soak: 4 ranks, SOAK_OPS (default 20000) mixed operations over every
# algorithm, every result checked, fds and anonymous memory flat from the end
# of the warm-up to the end (test/soak/soak.c). Uses the build in SOAK_BUILD
# (default build/, made by tools/build.sh), building what it needs.
# Usage: sh tools/soak.sh [extra soak args, e.g. -s SEED -m MAXCOUNT]
set -eu
cd "$(dirname "$0")/.."
b=${SOAK_BUILD:-build}
[ -f "$b/Makefile" ] || sh tools/build.sh
make -C "$b" -j2 sc-run test/soak/soak >/dev/null
start=$(date +%s)
rc=0
"$b/sc-run" -n 4 --timeout "${SOAK_TIMEOUT:-3600}" --label "$b/test/soak/soak" \
  -n "${SOAK_OPS:-20000}" -v "$@" || rc=$?
echo "tools/soak.sh: exit $rc after $(($(date +%s) - start)) s"
exit $rc
