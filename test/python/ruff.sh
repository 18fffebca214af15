#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# `ruff check` over the tree's Python: the package (python/), its tests
# (test/python/), perf/*.py, perf/compare/*.py and examples/, with the
# settings of python/pyproject.toml's [tool.ruff]. Skipped (exit 77) where ruff
# is not installed: Debian 12 has no ruff package. RUFF=/path/to/ruff picks one.
top=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
ruff=${RUFF:-ruff}
if ! command -v "$ruff" >/dev/null 2>&1; then
  echo "SKIP: ruff is not installed (not in Debian 12; e.g. pip install ruff, or RUFF=/path/to/ruff)"
  exit 77
fi
cd "$top" || exit 1
echo "$("$ruff" --version) over python/ test/python/ perf/ examples/"
# --no-cache: the source tree is read-only under make distcheck.
"$ruff" check --no-cache --config python/pyproject.toml \
  python test/python perf/*.py perf/compare/*.py examples
rc=$?
[ $rc -eq 0 ] && echo "ruff: no findings"
exit $rc
