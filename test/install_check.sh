#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Installs into a staging directory (DESTDIR) and builds the README's example
# the way a user would, `cc prog.c $(pkg-config --cflags --libs sparsecoll)`,
# then runs it on 2 ranks with the installed sc-run. Touches nothing outside
# the staging directory. Run from the build directory.
set -e
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
make install DESTDIR="$stage" >"$stage.log" 2>&1 || { cat "$stage.log"; exit 1; }
rm -f "$stage.log"
prefix=$(sed -n 's/^prefix=//p' sparsecoll.pc)
libdir=$(sed -n 's/^libdir=//p' sparsecoll.pc | sed "s|\${exec_prefix}|$prefix|")
export PKG_CONFIG_SYSROOT_DIR="$stage" PKG_CONFIG_PATH="$stage$libdir/pkgconfig"
for f in "$stage$libdir/libsparsecoll.so" "$stage$libdir/libsparsecoll.a" \
  "$stage$prefix/include/sparsecoll.h" "$stage$libdir/pkgconfig/sparsecoll.pc" "$stage$prefix/bin/sc-run"; do
  [ -e "$f" ] || { echo "install_check: $f was not installed"; exit 1; }
done
# The example from the README, verbatim between its ```c fences.
sed -n '/^```c$/,/^```$/p' "${top_srcdir:-..}/README.md" | sed '1d;$d' >"$stage/example.c"
cc -Wall -Werror "$stage/example.c" $(pkg-config --cflags --libs sparsecoll) -o "$stage/example"
# Only the public API may be exported.
extra=$(nm -D --defined-only "$stage$libdir/libsparsecoll.so" | awk '$2 == "T" {print $3}' | grep -v '^sc_' || true)
internal=$(nm -D --defined-only "$stage$libdir/libsparsecoll.so" | awk '$2 == "T" {print $3}' |
  grep '^sc_' | grep -vxF -f "${top_srcdir:-..}/include/libsparsecoll.sym" || true)
if [ -n "$extra$internal" ]; then
  echo "install_check: libsparsecoll.so exports non-API symbols: $extra $internal"
  exit 1
fi
LD_LIBRARY_PATH="$stage$libdir" "$stage$prefix/bin/sc-run" -n 2 --timeout 60 "$stage/example"
echo "install_check: installed library, header, pkg-config file and sc-run work"
