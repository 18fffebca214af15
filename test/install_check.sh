#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Installs into a staging directory (DESTDIR) and uses the installation the
# way a user would: builds the README's example and examples/allreduce.c with
# `cc prog.c $(pkg-config --cflags --libs sparsecoll)`, builds allreduce.c
# again with CMake (find_package(sparsecoll), examples/CMakeLists.txt), runs
# them on 2 ranks with the installed sc-run and checks their results, and
# builds the Python package with pip against the staged library when pip is
# there. Touches nothing outside the staging directory. Run from the build
# directory.
set -e
top=${top_srcdir:-..}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
make install DESTDIR="$stage" >"$stage.log" 2>&1 || { cat "$stage.log"; exit 1; }
rm -f "$stage.log"
makevar() { sed -n "s|^$1 = ||p" Makefile; }
version=$(makevar PACKAGE_VERSION)
prefix=$(sed -n 's/^prefix=//p' sparsecoll.pc)
libdir=$(sed -n 's/^libdir=//p' sparsecoll.pc | sed "s|\${exec_prefix}|$prefix|")
includedir=$(sed -n 's/^includedir=//p' sparsecoll.pc | sed "s|\${prefix}|$prefix|")
export PKG_CONFIG_SYSROOT_DIR="$stage" PKG_CONFIG_PATH="$stage$libdir/pkgconfig"
for f in "$stage$libdir/libsparsecoll.so" "$stage$libdir/libsparsecoll.a" \
  "$stage$includedir/sparsecoll.h" "$stage$includedir/sparsecoll_version.h" \
  "$stage$libdir/pkgconfig/sparsecoll.pc" "$stage$prefix/bin/sc-run" \
  "$stage$libdir/cmake/sparsecoll/sparsecollConfig.cmake" \
  "$stage$libdir/cmake/sparsecoll/sparsecollConfigVersion.cmake"; do
  [ -e "$f" ] || { echo "install_check: $f was not installed"; exit 1; }
done
# Only the public API may be exported.
extra=$(nm -D --defined-only "$stage$libdir/libsparsecoll.so" | awk '$2 == "T" {print $3}' | grep -v '^sc_' || true)
internal=$(nm -D --defined-only "$stage$libdir/libsparsecoll.so" | awk '$2 == "T" {print $3}' |
  grep '^sc_' | grep -vxF -f "$top/include/libsparsecoll.sym" || true)
if [ -n "$extra$internal" ]; then
  echo "install_check: libsparsecoll.so exports non-API symbols: $extra $internal"
  exit 1
fi
export LD_LIBRARY_PATH="$stage$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
run2() { # run2 PROGRAM: on 2 ranks with the installed sc-run
  "$stage$prefix/bin/sc-run" -n 2 --timeout 60 "$@"
}

# The example from the README, verbatim between its ```c fences.
sed -n '/^```c$/,/^```$/p' "$top/README.md" | sed '1d;$d' >"$stage/example.c"
cc -Wall -Werror "$stage/example.c" $(pkg-config --cflags --libs sparsecoll) -o "$stage/example"
run2 "$stage/example"

# examples/allreduce.c, built both ways; each rank prints one line when its
# result is right (and exits 1 when it is not).
check_allreduce() { # check_allreduce HOW PROGRAM
  run2 "$2" >"$stage/out" 2>&1 || { cat "$stage/out"; echo "install_check: allreduce ($1) failed"; exit 1; }
  n=$(grep -c "^allreduce: rank [01] of 2: 4096 elements correct (libsparsecoll $version)$" "$stage/out" || true)
  [ "$n" = 2 ] || { cat "$stage/out"; echo "install_check: allreduce ($1): $n of 2 ranks correct"; exit 1; }
  echo "install_check: examples/allreduce.c built with $1: 2 of 2 ranks correct"
}
cc -Wall -Wextra -Werror "$top/examples/allreduce.c" $(pkg-config --cflags --libs sparsecoll) \
  -o "$stage/allreduce-pc"
check_allreduce pkg-config "$stage/allreduce-pc"
command -v cmake >/dev/null || { echo "install_check: cmake is not installed (tools/deps.sh installs it)"; exit 1; }
cmake -S "$top/examples" -B "$stage/cmake-build" -DCMAKE_PREFIX_PATH="$stage$prefix" \
  -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$stage/cmake.log" 2>&1 &&
  cmake --build "$stage/cmake-build" >>"$stage/cmake.log" 2>&1 || {
  cat "$stage/cmake.log"
  echo "install_check: the CMake build of examples/ failed"
  exit 1
}
check_allreduce CMake "$stage/cmake-build/allreduce"
# A version newer than this one must be turned down.
mkdir -p "$stage/cmake-newer"
printf 'cmake_minimum_required(VERSION 3.13)\nproject(t C)\nfind_package(sparsecoll %s.%s REQUIRED)\n' \
  "$(($(echo "$version" | cut -d. -f1) + 1))" 0 >"$stage/cmake-newer/CMakeLists.txt"
if cmake -S "$stage/cmake-newer" -B "$stage/cmake-newer/b" -DCMAKE_PREFIX_PATH="$stage$prefix" \
  >"$stage/cmake.log" 2>&1; then
  echo "install_check: find_package(sparsecoll NEXT_MAJOR) accepted version $version"
  exit 1
fi

# pip install ./python against the staged library: the package's version is
# the library's (from the installed sparsecoll_version.h).
python=$(makevar PYTHON)
if [ "$python" != : ] && "$python" -m pip --version >/dev/null 2>&1 &&
  "$python" -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 61)' 2>/dev/null; then
  cp -r "$top/python" "$stage/pysrc"
  chmod -R u+w "$stage/pysrc"
  SPARSECOLL_PREFIX="$stage$prefix" "$python" -m pip install --no-build-isolation --no-deps --no-index \
    --target "$stage/py" "$stage/pysrc" >"$stage/pip.log" 2>&1 || {
    cat "$stage/pip.log"
    echo "install_check: pip install ./python failed"
    exit 1
  }
  got=$(PYTHONPATH="$stage/py" SPARSECOLL_LIBRARY="$stage$libdir/libsparsecoll.so" "$python" -c \
    'import importlib.metadata as m, sparsecoll; print(sparsecoll.__version__, m.version("sparsecoll"))')
  [ "$got" = "$version $version" ] || {
    echo "install_check: the pip-installed package says version '$got', the library is $version"
    exit 1
  }
  echo "install_check: pip install ./python: sparsecoll $version"
else
  echo "install_check: pip install ./python not tried ($python has no pip or no setuptools >= 61)"
fi
echo "install_check: installed library, headers, pkg-config and CMake files, sc-run and the Python package work"
