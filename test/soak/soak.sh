#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Soak under sc-run on 4 ranks: SOAK_OPS mixed operations (default 2000 in
# make check; tools/soak.sh runs 20000), every result checked, RSS and fds flat.
. "$top_srcdir/test/multi/lib.sh"
ops=${SOAK_OPS:-2000}
check "soak n=4 ops=$ops" "$SC_RUN" -n 4 --timeout "${SOAK_TIMEOUT:-300}" --label \
  "$top_builddir/test/soak/soak" -n "$ops" ${SOAK_ARGS:-}
grep 'soak:' "$tmpdir/out" || true
finish
