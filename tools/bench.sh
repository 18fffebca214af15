#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The main job: set up, build, and run a 4-rank all-reduce benchmark on this
# host, 8 B to 64 MiB, float32 sum, results checked.
set -e
cd "$(dirname "$0")/.."
sh tools/build.sh
cd build
exec ./sc-run -n 4 --timeout 1200 ./sc_allreduce_perf -b 8 -e 64M -f 2 "$@"
