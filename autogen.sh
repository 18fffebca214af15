#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Generates ./configure from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf --install --force
