#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The package's sparse algorithm and fusion policy names are the library's
# (sc_sparse_algo_name, sc_fusion_policy_name), and the ones docs/API.md fixes.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python
check "sparse algorithm and fusion policy names" "$PYTHON" "$PYT/names.py"
finish
