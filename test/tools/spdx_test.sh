#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every source file names its license: an "SPDX-License-Identifier:" line
# within its first three lines (after a shebang or an encoding line).
#
# Source files: C and CUDA sources and headers, shell and Python scripts,
# Makefile.inc/.am, configure.ac, m4 macros, templates (.in), the Python
# project file, CMake lists and the sanitizer suppressions, and any other
# file that starts with "#!". Prose (.md), images, traces, the fuzz seeds and
# data files such as libsparsecoll.sym are not sources.
#
# Which files are read: in a git checkout, the files git tracks or would
# track; without .git (a release tarball, make distcheck), every file under
# top_srcdir except what configure and the build generate.
#
# After the tree, the script checks itself on a small tree of its own: a
# source without the line must fail, named; one with it must pass.
set -u
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
top=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/spdx.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# scan DIR OUT: write the source files of DIR that lack the line to OUT;
# $nfiles is the number of source files read.
scan() {
  (
    cd "$1" || exit 1
    if [ -e .git ] && command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then
      git ls-files --cached --others --exclude-standard
    else
      find . \( -name .git -o -name _build -o -name _inst -o -name autom4te.cache \
        -o -name build-aux -o -name .deps -o -name .libs -o -name 'build*' \) -prune \
        -o -type f -print | sed 's|^\./||' |
        grep -v -E '(^|/)(configure|aclocal\.m4|Makefile|Makefile\.in|config\.h|config\.h\.in|config\.log|config\.status|libtool|stamp-h1|sparsecoll\.pc)$' |
        grep -v -E '(^|/)m4/(libtool|lt[a-z~]*)\.m4$'
    fi
  ) >"$tmp/all" || return 1
  # One awk for every file: the first three lines of each, no process per file.
  nfiles=$(cd "$1" && awk -v out="$2" '
    BEGIN { printf "" > out; n = 0 }
    /\/corpus\// { next }
    {
      f = $0
      src = (f ~ /\.(c|h|cu|cuh|sh|py|inc|am|ac|m4|in|toml|supp)$/ || f == "CMakeLists.txt")
      lines = 0; has = 0; first = ""
      if ((getline line < f) < 0) next
      close(f)
      while (lines < 3 && (getline line < f) > 0) {
        lines++
        if (lines == 1) first = line
        if (index(line, "SPDX-License-Identifier: ")) has = 1
      }
      close(f)
      if (!src && substr(first, 1, 2) != "#!") next
      n++
      if (!has) print f >> out
    }
    END { print n }' "$tmp/all") || return 1
  return 0
}

pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }

if ! scan "$top" "$tmp/missing"; then
  bad "cannot list the files under $top"
elif [ "$nfiles" -lt 10 ]; then
  bad "only $nfiles source files found under $top"
elif [ -s "$tmp/missing" ]; then
  cat "$tmp/missing"
  bad "$(wc -l <"$tmp/missing") of $nfiles source files have no SPDX-License-Identifier line (above)"
else
  ok "every one of $nfiles source files under $top names its license"
fi

# The check itself, on a tree without .git (found as in a release tarball).
mkdir -p "$tmp/t/pkg" "$tmp/t/tools"
i=0
while [ $i -lt 10 ]; do
  printf '/* SPDX-License-Identifier: BSD-3-Clause */\nint x%d;\n' $i >"$tmp/t/pkg/ok$i.c"
  i=$((i + 1))
done
printf '#!/bin/sh\n# SPDX-License-Identifier: BSD-3-Clause\ntrue\n' >"$tmp/t/tools/run"
printf '# Notes\nno license line\n' >"$tmp/t/README.md"
if scan "$tmp/t" "$tmp/m1" && [ ! -s "$tmp/m1" ] && [ "$nfiles" -eq 11 ]; then
  ok "a tree whose 11 sources all carry the line passes; prose is not read"
else
  bad "a tree whose sources all carry the line: $(cat "$tmp/m1") (read $nfiles)"
fi
printf '#include <stdio.h>\n' >"$tmp/t/pkg/bare.h"
printf '#!/bin/sh\necho no license\n' >"$tmp/t/tools/noext"
if scan "$tmp/t" "$tmp/m2" && [ "$(sort "$tmp/m2" | tr '\n' ' ')" = "pkg/bare.h tools/noext " ]; then
  ok "a header and an extensionless script without the line are named"
else
  bad "the files without the line were not both named: $(tr '\n' ' ' <"$tmp/m2")"
fi

echo "spdx_test: $pass passed, $fail failed"
[ $fail -eq 0 ]
