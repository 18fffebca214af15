#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Configures and builds in ./build (out of tree). Extra arguments go to configure.
set -e
cd "$(dirname "$0")/.."
sh tools/deps.sh
[ -x configure ] || ./autogen.sh >/dev/null
mkdir -p build
cd build
[ -f Makefile ] || ../configure --enable-werror "$@" >/dev/null
make -j"$(nproc)" >/dev/null
