#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Dangling paths: every repository path that a file of the project cites
# (in code comments, scripts, build files and Markdown) must exist.
#
# What counts as a cited path: a token that starts with one of the
# repository's top-level folders (the ones git tracks files in, plus docs/
# and the retired lib/ and src/) and ends in a file name with an extension,
# such as transport/tcp/tcp_io.c or docs/API.md; a leading ./ or ../ and a
# make or shell variable in front ($(top_srcdir)/, ${top}/) are dropped; a
# glob (lib/fusion/*.c) must match at least one file. A bare Markdown name
# (README.md) must exist at the top or next to the file that cites it.
# Absolute paths, URLs and paths behind another variable ($cuda_dir/...) are
# not checked, nor test logs (*.log, *.trs), libtool libraries (*.la), files
# configure writes from a tracked template (X from X.in) and the
# per-transport wrappers the build generates (test/multi/tcp-<script> from
# test/multi/<script>; likewise shm-, ucx-, verbs-).
# A line that writes a path on purpose (a test's fake file) carries the
# marker paths_test:ignore.
#
# Which files are read: in a git checkout, the files git tracks or would
# track (git ls-files --cached --others --exclude-standard); without .git
# (a release tarball, make distcheck), every text file under top_srcdir
# except what configure and the build generate.
#
# Fails listing file:line: path for each path that does not exist.
#   paths_test.sh            check (exit 1 on any dangling path)
#   paths_test.sh --list     print every cited path with its status
set -u
top=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top" || exit 1
mode=${1:-check}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/paths_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

if [ -e .git ] && command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then
  source_of_list="git ls-files"
  git ls-files --cached --others --exclude-standard >"$tmp/all"
else
  source_of_list="files under $top"
  find . \( -name .git -o -name _build -o -name _inst -o -name autom4te.cache \
    -o -name build-aux -o -name m4 -o -name .deps -o -name .libs -o -name 'build*' \) -prune \
    -o -type f -print |
    sed 's|^\./||' |
    grep -v -E '(^|/)(configure|aclocal\.m4|Makefile|Makefile\.in|config\.h|config\.h\.in|config\.log|config\.status|libtool|stamp-h1|sparsecoll\.pc)$' |
    grep -v -E '\.(o|lo|la|a|so|log|trs|tar|gz|xz|png|json)$' >"$tmp/all"
fi
# .gitignore holds patterns, not citations.
grep -v -E '(^|/)\.gitignore$' "$tmp/all" >"$tmp/all2" && mv "$tmp/all2" "$tmp/all"

# Text files only (the fuzz corpora are binary seeds), and only those present:
# one grep over them all (-I: a binary file does not match), then the empty
# ones, which cite nothing but count as scanned. A grep per file took most of
# this script's time on a loaded machine.
tr '\n' '\0' <"$tmp/all" | xargs -0 grep -Il . 2>/dev/null >"$tmp/files"
tr '\n' '\0' <"$tmp/all" | xargs -0 sh -c 'for f; do
  [ -f "$f" ] && [ ! -s "$f" ] && printf "%s\n" "$f"; done; exit 0' sh >>"$tmp/files"
nfiles=$(wc -l <"$tmp/files")
[ "$nfiles" -gt 0 ] || {
  echo "FAIL: no files to scan under $top ($source_of_list)"
  exit 1
}

# Top-level folders: those holding a scanned file, docs, and retired names.
tops=$(sed -n 's|^\([^/]*\)/.*|\1|p' "$tmp/files" | sort -u | tr '\n' ' ')
tops="$tops docs lib src"

# One line per candidate: file<TAB>line<TAB>path
tr '\n' '\0' <"$tmp/files" | xargs -0 awk -v tops="$tops" '
  BEGIN {
    n = split(tops, T, " ")
    for (i = 1; i <= n; i++) if (T[i] != "" && T[i] != ".") top[T[i]] = 1
    OFS = "\t"
  }
  function consider(tok, first, last, k) {
    while (tok ~ /[.,-]$/) tok = substr(tok, 1, length(tok) - 1)
    if (tok ~ /^\//) return
    while (tok ~ /^\.\.?\//) sub(/^\.\.?\//, "", tok)
    if (tok == "") return
    k = index(tok, "/")
    if (k > 0) {
      first = substr(tok, 1, k - 1)
      if (!(first in top)) return
      last = tok
      sub(/.*\//, "", last)
      # A file name with an extension (a glob counts).
      if (last !~ /^[A-Za-z0-9_*+-][A-Za-z0-9_.*+-]*\.[A-Za-z0-9*]+$/) return
      print FILENAME, FNR, tok
    } else if (tok ~ /^[A-Z][A-Za-z0-9_-]*\.md$/) {
      print FILENAME, FNR, tok
    }
  }
  /paths_test:ignore/ { next }
  {
    s = $0
    # $(top_srcdir)/x and the like are relative to the top; any other
    # variable in front makes the rest unknown: turn it into an absolute
    # path, which is not checked.
    gsub(/\$[({]?(top_srcdir|srcdir|abs_top_srcdir|abs_srcdir|top|srcdir)[)}]?\//, " ", s)
    gsub(/\$[({]?[A-Za-z_][A-Za-z0-9_]*[)}]?\//, " /", s)
    while (match(s, /[A-Za-z0-9_.*+\/-]+/)) {
      consider(substr(s, RSTART, RLENGTH))
      s = substr(s, RSTART + RLENGTH)
    }
  }' >"$tmp/cited"

bad=0
total=0
# The tab once: a command substitution in the loop's condition forks per line.
tab=$(printf '\t')
while IFS=$tab read -r file line path; do
  total=$((total + 1))
  ok=0
  case $path in
  *.log | *.trs)
    # Test logs: they exist in a build directory only.
    ok=1
    ;;
  */tcp-* | */shm-* | */ucx-* | */verbs-*)
    # Per-transport wrappers the build generates from the script without
    # the prefix (a glob such as ucx-*.sh: some script of that folder).
    # (Parameter expansion, not sed: a fork per path made this loop most of
    # the script's time.)
    base=${path##*/}
    gen=$path
    case $base in
    *-*)
      case ${base%%-*} in
      *[!a-z]*) ;;
      *) gen=${path%/*}/${base#*-} ;;
      esac
      ;;
    esac
    set -- $gen
    [ -e "$path" ] || [ -e "$1" ] && ok=1
    ;;
  *.la)
    # Libtool libraries: built from the sources of their Makefile.inc.
    ok=1
    ;;
  */*)
    case $path in
    *'*'*)
      # A glob: it must match something (set -- expands it here).
      set -- $path
      [ -e "$1" ] && ok=1
      ;;
    *)
      # A file configure writes from its template (AC_CONFIG_FILES) is cited
      # by its generated name.
      { [ -e "$path" ] || [ -e "$path.in" ]; } && ok=1
      ;;
    esac
    ;;
  *)
    dir=${file%/*}
    [ "$dir" = "$file" ] && dir=.
    { [ -e "$path" ] || [ -e "$dir/$path" ]; } && ok=1
    ;;
  esac
  if [ "$mode" = --list ]; then
    [ $ok = 1 ] && echo "ok       $file:$line: $path" || echo "MISSING  $file:$line: $path"
  elif [ $ok = 0 ]; then
    echo "$file:$line: $path does not exist"
    bad=$((bad + 1))
  fi
done <"$tmp/cited"

if [ "$bad" -gt 0 ]; then
  echo "FAIL: $bad of $total cited paths do not exist ($nfiles files from $source_of_list)"
  exit 1
fi
echo "PASS: $total cited paths in $nfiles files ($source_of_list), all exist"
exit 0
