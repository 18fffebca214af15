#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Installs what a fresh Debian 12 machine lacks to build and test
# libsparsecoll (as root; skipped when everything is already there).
set -e
# clang + libclang-rt-14-dev (libFuzzer and clang's sanitizer runtimes, only
# recommended by clang, so named here) and valgrind: the fuzz and sanitizer
# stages of .ci/run (tools/fuzz.sh, tools/sanitize.sh). cmake and python3-pip:
# test/install_check.sh builds examples/ with find_package(sparsecoll) and
# the Python package with pip. (ruff, which test/python/ruff.sh runs, has no
# Debian 12 package: that test is skipped where ruff is absent.)
pkgs="build-essential autoconf automake libtool pkg-config libcmocka-dev libhwloc-dev libucx-dev libibverbs-dev clang-format iproute2 python3-matplotlib python3-numpy python3-torch clang libclang-rt-14-dev valgrind cmake python3-pip"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "tools/deps.sh: missing packages:$missing; run as root (or install them) first" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
