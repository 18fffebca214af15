#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Cost of SC_CHECK_MISMATCH=1: sc_allreduce_perf with the check off and on,
# alternating run by run so that load from elsewhere lands on both, and per
# size the median out-of-place time of each and the difference (the added
# latency per operation). Not a test (speed is never asserted); run by hand:
#   sh test/failure/mismatch_cost.sh BUILD_DIR [ROUNDS] [NRANKS...]
# e.g. sh ../test/failure/mismatch_cost.sh . 5 2 4   (from a build directory)
set -e
b=${1:-.}
rounds=${2:-5}
ranks="2 4"
if [ $# -gt 2 ]; then
  shift 2
  ranks=$*
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in $ranks; do
  i=0
  while [ "$i" -lt "$rounds" ]; do
    for m in 0 1; do
      SC_CHECK_MISMATCH=$m "$b/sc-run" -n "$n" --timeout 300 "$b/sc_allreduce_perf" \
        -b 8 -e 1M -f 2 -n 100 -w 10 -c 0 |
        awk -v m="$m" '$1 ~ /^[0-9]+$/ && NF >= 6 { print $1, m, $6 }' >>"$tmp/n$n"
    done
    i=$((i + 1))
  done
  echo "# $n ranks, ${SC_TRANSPORT:-auto} transport, $rounds alternating runs of each; time in us"
  printf '%10s %10s %10s %10s %8s\n' bytes check=0 check=1 added ratio
  sort -n -k1,1 -k2,2 -k3,3g "$tmp/n$n" | awk '
    function med(a, k) { return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
    function flush() {
      if (size == "") return
      o = med(off, no); c = med(on, nc)
      printf "%10s %10.2f %10.2f %10.2f %8.2f\n", size, o, c, c - o, c / o
    }
    $1 != size { flush(); size = $1; no = 0; nc = 0 }
    { if ($2 == 0) off[++no] = $3; else on[++nc] = $3 }
    END { flush() }'
done
