#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Measures the TCP transport's two knobs on this host, alternating the
# candidate values round by round so that drifting load hits them alike:
#   SC_NSOCKS  : all-reduce time at large sizes for each socket count
#   SC_SPIN_US : 8-byte all-reduce latency for each spin budget
# Prints, per knob, P and size, the best (lowest) time over the rounds and the
# median. Usage (from a build directory, or with SC_BUILD=dir):
#   tcp_tune.sh [-n "2 4"] [-r ROUNDS] [-s "1 2 4"] [-u "0 10 50 200 1000"]
#               [-b 1M] [-e 64M] [--only nsocks|spin]
set -u
ranks="2 4"
rounds=3
socks="1 2 4"
spins="0 10 50 200 1000"
minb=1M
maxb=64M
only=""
while [ $# -gt 0 ]; do
  case "$1" in
  -n) ranks="$2"; shift 2 ;;
  -r) rounds="$2"; shift 2 ;;
  -s) socks="$2"; shift 2 ;;
  -u) spins="$2"; shift 2 ;;
  -b) minb="$2"; shift 2 ;;
  -e) maxb="$2"; shift 2 ;;
  --only) only="$2"; shift 2 ;;
  -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
  *) echo "tcp_tune.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
build="${SC_BUILD:-.}"
for b in sc-run sc_allreduce_perf; do
  [ -x "$build/$b" ] || { echo "tcp_tune.sh: $build/$b not found (run from a build directory or set SC_BUILD)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run P ENV... -- perf args: prints "size time_us" rows of the out-of-place column.
run() {
  local p=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done
  shift
  timeout 300 "$build/sc-run" -n "$p" --timeout 240 -x SC_TRANSPORT=tcp "${envs[@]}" \
    "$build/sc_allreduce_perf" -c 0 "$@" 2>/dev/null | awk '!/^#/ && NF >= 8 {print $1, $6}'
}

summarize() { # file with "key size time" lines -> best and median per key/size
  sort -k1,1 -k2,2n -k3,3g "$1" | awk '
    { k = $1 " " $2; v[k, ++n[k]] = $3; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
    END { for (i = 1; i <= m; i++) { k = order[i]; c = n[k];
            med = (c % 2) ? v[k, (c + 1) / 2] : (v[k, c / 2] + v[k, c / 2 + 1]) / 2;
            printf "%-32s %12.1f %12.1f\n", k, v[k, 1], med } }'
}

if [ "$only" != spin ]; then
  echo "# SC_NSOCKS: all-reduce float sum, $minb..$maxb, $rounds rounds (time in us: best, median)"
  for r in $(seq "$rounds"); do
    for p in $ranks; do
      for s in $socks; do
        run "$p" SC_NSOCKS="$s" -- -b "$minb" -e "$maxb" -f 4 -n 6 -w 2 |
          awk -v k="P=$p,nsocks=$s" '{print k, $1, $2}' >>"$tmp/nsocks"
      done
    done
  done
  printf "%-32s %12s %12s\n" "# config size" "best" "median"
  summarize "$tmp/nsocks"
fi
if [ "$only" != nsocks ]; then
  echo "# SC_SPIN_US: all-reduce float sum of 8 B, 3000 iterations, $rounds rounds (us: best, median)"
  for r in $(seq "$rounds"); do
    for p in $ranks; do
      for u in $spins; do
        run "$p" SC_SPIN_US="$u" -- -b 8 -e 8 -n 3000 -w 100 |
          awk -v k="P=$p,spin_us=$u" '{print k, $1, $2}' >>"$tmp/spin"
      done
    done
  done
  printf "%-32s %12s %12s\n" "# config size" "best" "median"
  summarize "$tmp/spin"
fi
