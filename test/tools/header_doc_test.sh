#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The public header documents every function, and docs/API.md names it.
#
# check DIR reads DIR/include/sparsecoll.h, DIR/include/libsparsecoll.sym and
# DIR/docs/API.md and fails, naming each offender, when:
# - a public function has no comment of its own: the line before the first
#   line of its declaration must end a comment (`*/` at its end, no code on
#   it). A group comment does not count for the declarations after the
#   first: every function carries its own, at least a line saying what it is
#   and pointing to the one that has the full contract;
# - a function is not named in docs/API.md (as a whole word);
# - the header and libsparsecoll.sym disagree (a symbol not declared, a
#   declaration not exported), or fewer functions were found than the symbol
#   file lists (so that a parser that misses declarations cannot pass);
# - something at file scope looks like a call of sc_...( but was not read as
#   a declaration (the parser would have skipped it);
# - a link of docs/API.md to a section, in the page or in another
#   page of docs (](NAME#anchor)), names no heading there (GitHub's anchors: lower case,
#   punctuation dropped, spaces to hyphens, -1, -2 ... for repeats).
# A declaration is a statement at file scope (comments and preprocessor
# lines removed, statements ending at ; { or }) that is not a typedef and
# reads TYPE [*] sc_name( ... with any return type (int, void, size_t,
# const char *, sc_result_t, ...), on one line or several.
#
# The header is include/sparsecoll.h, or its template (the same name plus
# .in) where configure makes the header from one.
#
# The script then runs check on the tree (must pass) and on copies broken
# on purpose (must fail, naming the function): one function's comment
# removed from the header, one function's name removed from docs/API.md.
top_srcdir=${top_srcdir:-.}
hdr=include/sparsecoll.h
[ -f "$top_srcdir/$hdr" ] || [ ! -f "$top_srcdir/$hdr.in" ] || hdr=$hdr.in
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Prints "LINE NAME COMMENTED" for each declaration of $1 (COMMENTED: 1 when
# the line before LINE ends a comment), "SKIPPED LINE text" for a statement
# that mentions sc_...( and is no declaration.
decls() {
  awk '
    BEGIN { incom = 0; stmt = ""; start = 0 }
    {
      line = $0; code = ""; rest = line
      # Code of this line, comments blanked out; incom carries over.
      while (rest != "") {
        if (incom) {
          i = index(rest, "*/")
          if (!i) { rest = ""; break }
          rest = substr(rest, i + 2); incom = 0; code = code " "
        } else {
          i = index(rest, "/*")
          if (!i) { code = code rest; rest = ""; break }
          code = code substr(rest, 1, i - 1); rest = substr(rest, i + 2); incom = 1
        }
      }
      # Whether this line closes a comment and carries no code.
      t = line; sub(/[ \t]+$/, "", t)
      endscom[NR] = (t ~ /\*\/$/ && code ~ /^[ \t]*$/)
      if (code ~ /^[ \t]*#/) next
      n = length(code)
      for (j = 1; j <= n; j++) {
        c = substr(code, j, 1)
        if (c == ";" || c == "{" || c == "}") { flush(); continue }
        if (stmt == "" && c ~ /[ \t]/) continue
        if (stmt == "") start = NR
        stmt = stmt c
      }
      if (stmt != "") stmt = stmt " "
    }
    function flush(   s, name) {
      s = stmt; stmt = ""
      gsub(/[ \t]+/, " ", s); sub(/^ /, "", s)
      if (s == "") return
      if (s ~ /^typedef /) return
      if (match(s, /^[A-Za-z_][A-Za-z0-9_]*( [A-Za-z_][A-Za-z0-9_]*)*( ?\*+ ?| )sc_[A-Za-z0-9_]+ ?\(/)) {
        name = substr(s, 1, RLENGTH)
        sub(/ ?\($/, "", name); sub(/^.*[ *]/, "", name)
        print start, name, (start > 1 ? endscom[start - 1] : 0)
      } else if (s ~ /sc_[A-Za-z0-9_]+ ?\(/) {
        print "SKIPPED", start, s
      }
    }
  ' "$1"
}

# GitHub's anchors of the headings of a Markdown file (outside code fences).
slugs() {
  awk '
    /^```/ { fence = !fence; next }
    fence || !/^#+ / { next }
    {
      s = tolower($0)
      sub(/^#+ +/, "", s)
      gsub(/[^a-z0-9 _-]/, "", s)
      gsub(/ /, "-", s)
      n = seen[s]++
      print (n ? s "-" n : s)
    }' "$1"
}

# check DIR: 0 when everything holds; prints one line per offence.
check() {
  d=$1
  h="$d/$hdr"
  sym="$d/include/libsparsecoll.sym"
  api="$d/docs/API.md"
  for f in "$h" "$sym" "$api"; do
    [ -f "$f" ] || { echo "missing $f"; return 1; }
  done
  out=0
  rm -f "$tmp"/slugs.*
  decls "$h" >"$tmp/decls" || { echo "cannot parse $h"; return 1; }
  grep '^SKIPPED ' "$tmp/decls" | while read -r _ line text; do
    echo "$h:$line: not read as a declaration: $text"
  done
  grep -q '^SKIPPED ' "$tmp/decls" && out=1
  grep -v '^SKIPPED ' "$tmp/decls" >"$tmp/fns"
  nf=$(wc -l <"$tmp/fns")
  ns=$(grep -c '^sc_' "$sym")
  if [ "$nf" -lt "$ns" ] || [ "$ns" -eq 0 ]; then
    echo "found $nf function declarations in $h, fewer than the $ns symbols of $sym"
    out=1
  fi
  awk '{ print $2 }' "$tmp/fns" | sort >"$tmp/declared"
  grep '^sc_' "$sym" | sort >"$tmp/exported"
  for f in $(comm -13 "$tmp/declared" "$tmp/exported"); do
    echo "$f: in $sym, not declared in $h"
    out=1
  done
  for f in $(comm -23 "$tmp/declared" "$tmp/exported"); do
    echo "$f: declared in $h, not in $sym"
    out=1
  done
  while read -r line name commented; do
    if [ "$commented" != 1 ]; then
      echo "$name: no comment before its declaration ($h:$line)"
      out=1
    fi
  done <"$tmp/fns"
  grep -ow 'sc_[A-Za-z0-9_]*' "$api" | sort -u >"$tmp/named"
  for f in $(comm -23 "$tmp/declared" "$tmp/named"); do
    echo "$f: not named in $api"
    out=1
  done
  # Links of docs/API.md to sections: ](#anchor) and ](NAME#anchor).
  grep -o '](\([A-Za-z0-9_./-]*\.md\)\{0,1\}#[^)]*)' "$api" | sort -u >"$tmp/links"
  while read -r link; do
    target=$(printf '%s\n' "$link" | sed 's/^](\([^#]*\)#.*/\1/')
    anchor=$(printf '%s\n' "$link" | sed 's/^][^#]*#\(.*\))$/\1/')
    file="$api"
    [ -n "$target" ] && file="$d/docs/$(basename "$target")"
    cache="$tmp/slugs.$(basename "$file")"
    if [ ! -f "$file" ]; then
      echo "$api: link $link: no file $file"
      out=1
    elif ! { [ -f "$cache" ] || slugs "$file" >"$cache"; } ||
      ! grep -qxF -- "$anchor" "$cache"; then
      echo "$api: link $link: no such section in $file"
      out=1
    fi
  done <"$tmp/links"
  [ "$out" -eq 0 ] && echo "$nf functions, each commented in the header and named in docs/API.md"
  return $out
}

if out=$(check "$top_srcdir" 2>&1); then
  ok "the tree: $out"
else
  bad "the tree:"
  printf '%s\n' "$out"
fi

# Broken copies. The victim: the first declaration that follows a comment
# which ends on its own line and starts on a line of its own, so that the
# whole comment can go.
copy() {
  rm -rf "$tmp/t" && mkdir -p "$tmp/t/include" "$tmp/t/docs"
  cp "$top_srcdir/$hdr" "$top_srcdir/include/libsparsecoll.sym" "$tmp/t/include/"
  cp "$top_srcdir"/docs/*.md "$tmp/t/docs/"
}
victim=sc_comm_split
vline=$(decls "$top_srcdir/$hdr" | awk -v v=$victim '$2 == v { print $1 }')
copy
# Drop the comment block that ends on the line before the declaration.
awk -v at="$vline" '
  { lines[NR] = $0 }
  END {
    s = at - 1
    while (s > 1 && lines[s] !~ /^\/\*/) s--
    for (i = 1; i <= NR; i++) if (i < s || i >= at) print lines[i]
  }' "$top_srcdir/$hdr" >"$tmp/t/$hdr"
if [ -z "$vline" ]; then
  bad "no declaration of $victim found to break"
elif out=$(check "$tmp/t" 2>&1); then
  bad "a header without the comment of $victim passes: $out"
elif printf '%s\n' "$out" | grep -q "^$victim: no comment before its declaration"; then
  ok "a header without the comment of $victim fails naming it"
else
  bad "a header without the comment of $victim fails, but not naming it:"
  printf '%s\n' "$out"
fi

copy
sed "s/\\b$victim\\b/sc_comm_sp1it/g" "$top_srcdir/docs/API.md" >"$tmp/t/docs/API.md"
if out=$(check "$tmp/t" 2>&1); then
  bad "a docs/API.md without $victim passes: $out"
elif printf '%s\n' "$out" | grep -q "^$victim: not named in "; then
  ok "a docs/API.md without $victim fails naming it"
else
  bad "a docs/API.md without $victim fails, but not naming it:"
  printf '%s\n' "$out"
fi

# A declaration the symbol file does not export, and an exported symbol the
# header does not declare.
copy
grep -v '^sc_barrier$' "$top_srcdir/include/libsparsecoll.sym" >"$tmp/t/include/libsparsecoll.sym"
echo sc_not_declared >>"$tmp/t/include/libsparsecoll.sym"
if out=$(check "$tmp/t" 2>&1); then
  bad "a symbol file that disagrees with the header passes"
elif printf '%s\n' "$out" | grep -q '^sc_barrier: declared in .*, not in ' &&
  printf '%s\n' "$out" | grep -q '^sc_not_declared: in .*, not declared in '; then
  ok "a symbol file that disagrees with the header fails naming both"
else
  bad "a symbol file that disagrees with the header fails, but not naming both:"
  printf '%s\n' "$out"
fi

# Links to sections that do not exist, in the page and in another page; a
# link to a section of another page that exists passes.
copy
other=docs/FAILURES.md
oname=$(basename "$other")
printf '\nSee [nowhere](#no-such-section), [elsewhere](%s#no-such-section).\n' "$oname" \
  >>"$tmp/t/docs/API.md"
first=$(slugs "$top_srcdir/$other" | head -1)
printf '\nSee [there](%s#%s).\n' "$oname" "$first" >>"$tmp/t/docs/API.md"
if out=$(check "$tmp/t" 2>&1); then
  bad "a docs/API.md with broken section links passes"
elif printf '%s\n' "$out" | grep -q 'link ](#no-such-section): no such section' &&
  printf '%s\n' "$out" | grep -qF "link ]($oname#no-such-section): no such section" &&
  ! printf '%s\n' "$out" | grep -q "#$first)"; then
  ok "a docs/API.md with broken section links fails naming them (and only them)"
else
  bad "a docs/API.md with broken section links fails, but not naming exactly them:"
  printf '%s\n' "$out"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
