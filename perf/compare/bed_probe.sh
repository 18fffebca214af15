#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Why does an all-reduce on an sc-netbed bed stay below the link rate? Runs one
# algorithm at one size under several configurations (environment settings of
# the ranks), alternating them round by round so that drifting load hits all
# alike, and prints per configuration: the best and median time, busbw as a
# fraction of the link rate, the ranks' CPU time (user + sys, summed over
# ranks) per operation and the machine's busy share during the runs (from
# /proc/stat: everyone's work, the bed's softirq included). A bed that is
# CPU-bound shows the machine near 100% busy and gains from settings that
# save CPU; one that is link-bound shows idle CPU.
#
# Usage (from a build directory, or with SC_BUILD=dir; root):
#   bed_probe.sh --netbed=scnb-ID [-n P] [-a ALGO] [-s SIZE] [-i ITERS] [-r ROUNDS]
#                CONFIG...
# CONFIG: "default" or VAR=VALUE[,VAR=VALUE...], e.g. SC_NSOCKS=1
# SC_CHUNK_BYTES=2097152 SC_SOCKBUF_BYTES=16777216. Defaults: all the bed's
# ranks, ring, 64M, 3 iterations (+1 warm-up), 2 rounds.
set -u
bed="" p="" algo=ring size=64M iters=3 rounds=2
die() { echo "bed_probe.sh: $*" >&2; exit 2; }
configs=()
while [ $# -gt 0 ]; do
  case "$1" in
  --netbed=*) bed="${1#--netbed=}"; shift ;;
  -n) p="$2"; shift 2 ;;
  -a) algo="$2"; shift 2 ;;
  -s) size="$2"; shift 2 ;;
  -i) iters="$2"; shift 2 ;;
  -r) rounds="$2"; shift 2 ;;
  -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
  -*) die "unknown option '$1'" ;;
  *) configs+=("$1"); shift ;;
  esac
done
[ -n "$bed" ] || die "--netbed=scnb-ID is required"
case "$bed" in scnb-*) ;; *) bed="scnb-$bed" ;; esac
[ ${#configs[@]} -gt 0 ] || configs=(default)
build="$(cd "${SC_BUILD:-.}" && pwd)"
state="${SC_NETBED_STATE_DIR:-/run/sc-netbed}/$bed.env"
[ -r "$state" ] || die "no $state: bring the bed up first"
hosts=$(sed -n 's/^NETBED_HOSTS=//p' "$state")
m=$(sed -n 's/^NETBED_RANKS_PER_HOST=//p' "$state")
bps=$(sed -n 's/^NETBED_RATE_BPS=//p' "$state")
p=${p:-$((hosts * m))}
for b in sc-run sc_allreduce_perf; do [ -x "$build/$b" ] || die "$build/$b not found"; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }
for _ in $(seq "$rounds"); do
  for c in "${configs[@]}"; do
    envs=()
    if [ "$c" != default ]; then
      IFS=, read -ra kv <<<"$c"
      for x in "${kv[@]}"; do envs+=(-x "$x"); done
    fi
    read -r b0 t0 < <(busy)
    # sc-run waits for its ranks, so its children's CPU time is theirs.
    out=$( { TIMEFORMAT='%U %S'; time timeout 600 "$build/sc-run" --netbed="$bed" -n "$p" \
      --timeout 500 "${envs[@]}" "$build/sc_allreduce_perf" -a "$algo" -b "$size" -e "$size" \
      -n "$iters" -w 1 -c 0 2>/dev/null; } 2>&1)
    read -r b1 t1 < <(busy)
    line=$(echo "$out" | awk '!/^#/ && NF >= 8 {print $1, $6; exit}')
    cpu=$(echo "$out" | tail -1)
    [ -n "$line" ] || { echo "# $c: run failed" >&2; continue; }
    echo "$c $line $cpu $(awk -v a="$b0" -v b="$b1" -v x="$t0" -v y="$t1" 'BEGIN {printf "%.3f", (b - a) / (y - x)}')" >>"$tmp/raw"
  done
done
[ -s "$tmp/raw" ] || die "every run failed"
echo "# bed $bed ($hosts hosts x $m, $(sed -n 's/^NETBED_RATE=//p' "$state")), P=$p, $algo, size $size," \
  "$iters iterations + 1 warm-up (+ startup in the CPU figures), $rounds rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-44s %10s %10s %7s %14s %9s\n" "# config" "best_us" "median_us" "link" "cpu_s/op" "machine"
awk -v p="$p" -v bps="$bps" -v it="$iters" '
  { k = $1; n[k]++; t[k, n[k]] = $3; s[k] = $2; cpu[k] += ($4 + $5) / (it + 1); busy[k] += $6
    if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
  END {
    for (i = 1; i <= m; i++) {
      k = order[i]; c = n[k]
      for (a = 1; a <= c; a++) for (b = a + 1; b <= c; b++) if (t[k, b] < t[k, a]) { x = t[k, a]; t[k, a] = t[k, b]; t[k, b] = x }
      med = (c % 2) ? t[k, (c + 1) / 2] : (t[k, c / 2] + t[k, c / 2 + 1]) / 2
      bw = s[k] / (t[k, 1] * 1e-6) * 2 * (p - 1) / p
      printf "%-44s %10.0f %10.0f %7.2f %14.2f %8.0f%%\n", k, t[k, 1], med, bw * 8 / bps, cpu[k] / c, 100 * busy[k] / c
    }
  }' "$tmp/raw"
