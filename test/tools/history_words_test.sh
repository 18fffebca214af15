#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# History words: docs, comments and scripts describe the library as it is,
# not how it was built. Fails naming file:line for each line that speaks of
# the work itself: a "session", "this stop", "the last stop", "stop 12",
# "issue 7", "issue #7", "wave 3", "this engineer", "the closing note", "we
# found", "found later", "measured again", "is being added".
#
# Ordinary words stay allowed: SIGSTOP, a stopped rank, "stop the other
# ranks", a test's arguments ("run 4 stop 2 6 4": the mode and a rank),
# "every rank must issue the same calls".
#
# Which files are read: in a git checkout, the files git tracks or would
# track (git ls-files --cached --others --exclude-standard); without .git
# (a release tarball, make distcheck), every text file under top_srcdir
# except what configure and the build generate, as test/tools/paths_test.sh
# does. This script is left out: it spells the words it looks for.
#
# HISTORY_WORDS_SKIP, a space-separated list of paths relative to the top,
# leaves those files out (to look at the rest while they are being
# rewritten elsewhere); make check does not set it.
#
# After the tree, the script checks itself on small trees of its own: a
# history phrase must fail naming its file and line, ordinary uses must pass.
set -u
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
top=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
me=test/tools/history_words_test.sh

tmp=$(mktemp -d "${TMPDIR:-/tmp}/history_words.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# Extended regular expressions, matched case-insensitively. $w and $e are
# a word's edges (the line's end, or a character that is not a letter, digit
# or underscore), so that "stop" is not found in "SIGSTOP" nor "session" in
# "possession". A number after "stop" counts unless another number follows
# it: "run 4 stop 2 6 4" is a test's mode, rank and counts.
w='(^|[^[:alnum:]_])'
e='([^[:alnum:]_]|$)'
patterns="${w}sessions?$e
(this|last|next|previous|earlier|later) (stop|wave)$e
${w}stops? #?[0-9]+([^0-9 ]|\$| +[^0-9 ])
${w}issues? #?[0-9]
${w}waves? #?[0-9]
this engineer
closing note
${w}we found
found later
measured again
being added"

# scan DIR OUT: list DIR's files to read, then write file:line: text to OUT
# for each line with a history word; $nfiles is the number of files read.
scan() {
  dir=$1
  out=$2
  (
    cd "$dir" || exit 1
    if [ -e .git ] && command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then
      git ls-files --cached --others --exclude-standard
    else
      find . \( -name .git -o -name _build -o -name _inst -o -name autom4te.cache \
        -o -name build-aux -o -name m4 -o -name .deps -o -name .libs -o -name 'build*' \) -prune \
        -o -type f -print |
        sed 's|^\./||' |
        grep -v -E '(^|/)(configure|aclocal\.m4|Makefile|Makefile\.in|config\.h|config\.h\.in|config\.log|config\.status|libtool|stamp-h1|sparsecoll\.pc)$' |
        grep -v -E '\.(o|lo|la|a|so|log|trs|tar|gz|xz|png|json)$'
    fi
  ) >"$tmp/all" || return 1
  : >"$tmp/listed"
  while IFS= read -r f; do
    [ "$f" = "$me" ] && continue
    skipped=0
    for s in ${HISTORY_WORDS_SKIP:-}; do [ "$f" = "$s" ] && skipped=1; done
    [ $skipped = 1 ] || [ ! -f "$dir/$f" ] || printf '%s\n' "$f" >>"$tmp/listed"
  done <"$tmp/all"
  # Text files only (the fuzz corpora are binary seeds; -I passes them by).
  (cd "$dir" && tr '\n' '\0' <"$tmp/listed" | xargs -0 grep -I -l -e '') >"$tmp/files"
  nfiles=$(wc -l <"$tmp/files")
  printf '%s\n' "$patterns" >"$tmp/patterns"
  (cd "$dir" && tr '\n' '\0' <"$tmp/files" | xargs -0 grep -n -H -i -I -E -f "$tmp/patterns") |
    cut -c1-200 >"$out"
  return 0
}

pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }

# The tree.
if ! scan "$top" "$tmp/found"; then
  bad "cannot list the files under $top"
elif [ "$nfiles" -eq 0 ]; then
  bad "no files to scan under $top"
elif [ -s "$tmp/found" ]; then
  cat "$tmp/found"
  bad "$(wc -l <"$tmp/found") lines in $nfiles files speak of how the project was built (above)"
else
  ok "no history words in $nfiles files under $top${HISTORY_WORDS_SKIP:+ (skipped: $HISTORY_WORDS_SKIP)}"
fi

# A run on one of the small trees below ends here.
[ "${HISTORY_WORDS_INNER:-}" = 1 ] && { [ $fail -eq 0 ]; exit; }

# The check itself, on a tree of one file (notes/draft.txt; no .git, so the
# files are found as in a release tarball). caught TEXT: a file holding TEXT
# on its second line must fail, named with that line. allowed TEXT: a file
# holding TEXT must pass.
mini() {
  rm -rf "$tmp/t" && mkdir -p "$tmp/t/notes"
  printf 'Notes\n%s\n' "$1" >"$tmp/t/notes/draft.txt"
  HISTORY_WORDS_INNER=1 HISTORY_WORDS_SKIP='' top_srcdir="$tmp/t" sh "$self" 2>&1
}
caught() {
  out=$(mini "$1")
  rc=$?
  if [ $rc -ne 0 ] && printf '%s\n' "$out" | grep -q '^notes/draft.txt:2:'; then
    ok "caught, with its file and line: \"$1\""
  else
    bad "not caught (rc=$rc): \"$1\": $out"
  fi
}
allowed() {
  out=$(mini "$1")
  rc=$?
  if [ $rc -eq 0 ]; then ok "allowed: \"$1\""; else bad "wrongly caught: \"$1\": $out"; fi
}
caught "as the last stop found, the ring was slower"
caught "Measured in this session."
caught "This stop adds the verbs transport."
caught "(stop 12)"
caught "fixed in issue #41"
caught "see Issue 7 for the numbers"
caught "wave 2 moved the transports"
caught "as this engineer measured"
caught "measured in the closing note of the previous wave"
caught "measured again on a quiet machine"
caught "Sessions 3-5 moved the transports"
allowed "SIGSTOP the rank"
allowed "a stopped rank times out; sc-run stops the other ranks"
allowed 'check "stopped rank 2 of 4" run 4 stop 2 6 4 SC_TIMEOUT_MS=3000'
allowed "every rank must issue the same collectives in the same order"
allowed "the worker stops at the next slice; stop the scheduler"
allowed "the library takes possession of the buffer"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
