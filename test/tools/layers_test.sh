#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The layer check (test/tools/layers.sh): the tree passes it, and it catches
# what it is for. A copy of a few real folders gets one upward include and,
# separately, one include into a sibling folder; each must fail, naming the
# file and line.
top_srcdir=${top_srcdir:-.}
CHECK="$top_srcdir/test/tools/layers.sh"
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if out=$(top_srcdir="$top_srcdir" sh "$CHECK" 2>&1); then
  ok "the tree: $out"
else
  bad "the tree has upward includes:"
  echo "$out"
fi

# The picture of the layers users read must be the one the code has.
doc="$top_srcdir/docs/ARCHITECTURE.md"
want=$(top_srcdir="$top_srcdir" sh "$CHECK" --table)
have=$(sed -n '/^| folder | includes headers of |$/,/^$/p' "$doc" | sed '/^$/d')
if [ -n "$have" ] && [ "$want" = "$have" ]; then
  ok "docs/ARCHITECTURE.md's layer table is the tree's"
else
  bad "docs/ARCHITECTURE.md's layer table differs from 'layers.sh --table':"
  printf '%s\n' "$want"
fi

# A small tree: lib/base below kernels below transport below lib/core,
# transport/tcp beside transport/shm.
mk() {
  rm -rf "$tmp/t" && mkdir -p "$tmp/t/lib/base" "$tmp/t/lib/core" "$tmp/t/kernels/cpu" \
    "$tmp/t/transport/tcp" "$tmp/t/transport/shm"
  printf '#include "sparsecoll.h"\n' >"$tmp/t/lib/base/error.h"
  printf '#include "lib/base/error.h"\n' >"$tmp/t/lib/core/comm.h"
  printf '#include "lib/base/error.h"\n' >"$tmp/t/kernels/cpu/reduce.c"
  printf '#include "lib/base/error.h"\n' >"$tmp/t/transport/tcp/tcp.c"
  printf '#include "lib/base/error.h"\n' >"$tmp/t/transport/shm/shm.c"
}
mk
if top_srcdir="$tmp/t" sh "$CHECK" >/dev/null 2>&1; then ok "a clean small tree passes"; else
  bad "a clean small tree fails"; fi

# caught WHAT FILE LINE PATTERN: append LINE to FILE of a fresh small tree; the
# check must fail and print PATTERN (the file and line it blames).
caught() {
  mk
  printf '%s\n' "$3" >>"$tmp/t/$2"
  out=$(top_srcdir="$tmp/t" sh "$CHECK" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] && echo "$out" | grep -q "$4"; then
    ok "$1 fails with its file and line"
  else
    bad "$1 was not caught (rc=$rc): $out"
  fi
}
caught "an upward include" lib/base/error.h '#include "lib/core/comm.h"' \
  '^lib/base/error.h:2: .*lib/core/comm.h (layer lib/core, above it)'
caught "an upward include into lib/ from a plug-in family" kernels/cpu/reduce.c \
  '#include "lib/core/comm.h"' '^kernels/cpu/reduce.c:2: .*(layer lib/core, above it)'
caught "an include into a sibling folder" transport/tcp/tcp.c \
  '#include "transport/shm/shm.h"' '^transport/tcp/tcp.c:2: .*sibling folder' # paths_test:ignore
caught "an include of no layer" lib/core/comm.h '#include "nowhere/x.h"' \
  '^lib/core/comm.h:2: includes "nowhere/x.h", which is in no layer'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
