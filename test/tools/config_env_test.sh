#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every SC_* variable of lib/base/config.c's table is printed by
# `sc-info --env --markdown` and documented in docs/CONFIG.md, whose rows are
# sc-info's, word for word.
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
SC_INFO="$top_builddir/sc-info"
DOC="$top_srcdir/docs/CONFIG.md"
CONFIG_C="$top_srcdir/lib/base/config.c"
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }

table=$("$SC_INFO" --env --markdown)
rc=$?
# The variables as the source declares them: {"SC_NAME", ... in the table.
declared=$(grep -o '^ *{"SC_[A-Z0-9_]*"' "$CONFIG_C" | grep -o 'SC_[A-Z0-9_]*')
listed=$(printf '%s\n' "$table" | sed -n 's/^| `\(SC_[A-Z0-9_]*\)` |.*/\1/p')

if [ $rc -eq 0 ] && printf '%s\n' "$table" | head -1 | grep -qx '| variable | default | meaning |'; then
  ok "sc-info --env --markdown prints the table header"
else
  bad "sc-info --env --markdown (rc=$rc)"
fi

if [ -n "$declared" ] && [ "$declared" = "$listed" ]; then
  ok "sc-info lists all $(echo "$declared" | wc -l) variables of lib/base/config.c in order"
else
  bad "sc-info's variables differ from lib/base/config.c's"
  echo "  declared: $(echo $declared)"
  echo "  listed:   $(echo $listed)"
fi

if [ ! -f "$DOC" ]; then
  bad "$DOC does not exist"
else
  missing=""
  for v in $listed; do
    grep -q "\`$v\`" "$DOC" || missing="$missing $v"
  done
  if [ -z "$missing" ]; then
    ok "every variable appears in docs/CONFIG.md"
  else
    bad "docs/CONFIG.md does not document:$missing"
  fi
  # The page reproduces the rows: a row that differs from sc-info's is stale.
  stale=""
  for v in $listed; do
    row=$(printf '%s\n' "$table" | grep -F "| \`$v\` |")
    grep -qxF "$row" "$DOC" || stale="$stale $v"
  done
  if [ -z "$stale" ]; then
    ok "docs/CONFIG.md rows match sc-info --env --markdown"
  else
    bad "docs/CONFIG.md rows differ from sc-info --env --markdown for:$stale"
  fi
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
