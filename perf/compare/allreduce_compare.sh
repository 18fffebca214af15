#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# libsparsecoll's all-reduce against Open MPI and Gloo, in one run, libraries
# alternating, same sizes, iteration counts, dtype and rank placement (see
# docs/BENCHMARKING.md). On this host (default):
#   ours-shm  sc-run + sc_allreduce_perf, SC_TRANSPORT=shm
#   mpi-shm   Open MPI MPI_Allreduce, --mca btl vader,self
#   ours-tcp  sc-run + sc_allreduce_perf, SC_TRANSPORT=tcp
#   mpi-tcp   Open MPI MPI_Allreduce, --mca btl tcp,self over lo
#   ours-ucx  sc-run + sc_allreduce_perf, SC_TRANSPORT=ucx (UCX picks its
#             transports: shared memory here; UCX_TLS is passed through)
#   mpi-ucx   Open MPI MPI_Allreduce, --mca pml ucx (the same UCX)
#   gloo      torch.distributed all_reduce, backend gloo over lo
# On an sc-netbed emulated cluster (--netbed[=scnb-ID], root; ranks placed as
# sc-run --netbed places them: consecutive ranks share a host):
#   ours-ALGO sc-run --netbed + sc_allreduce_perf -a compare: ring, tree, rd,
#             rabenseifner, hier forced and auto, in one launch per size; mpi-han
#             is mpi below with --mca coll_han_priority 100 (hierarchical)
#   mpi       mpirun inside host 0, one orted per host started through
#             `sc-netbed rsh`, --mca btl tcp,self (tcp,vader,self with several
#             ranks per host), mpi_yield_when_idle 1 (busy-polling ranks starve
#             the bed's network stack on few cores)
#   gloo      gloo_allreduce.py --sc-run under sc-run --netbed (rendezvous at
#             host 0, GLOO_SOCKET_IFNAME = the bed's interface)
#   and busbw is also printed as a fraction of the link rate (ring's limit).
# float32 sum; time = slowest rank's average per operation (us), busbw =
# size / time x 2(P-1)/P (GB/s, 1e9 B). Iterations per size: BUDGET / size
# clamped to MIN..2000 (-I BUDGET, -i MIN; default 256 MiB and 10, on a bed
# 128 MiB and 3), warm-up a tenth (>= 2, on a bed >= 1).
# A library or size that fails shows n/a and a '#' line says why.
#
# Usage (from a build directory, or with SC_BUILD=dir):
#   allreduce_compare.sh [-n "2 4"] [-b 8] [-e 64M] [-f 4] [-r ROUNDS] [-I BYTES]
#                        [-i MIN] [-J FILE] [--skip LIB,...] [--bind core|none]
#                        [--netbed[=scnb-ID]]
# On a bed -n defaults to all its ranks and -b/-e/-f to 1M/64M/16 (1, 16,
# 64 MiB). -r ROUNDS repeats the whole alternation and keeps each cell's best
# time. --skip takes the names above (on a bed: ours, mpi, gloo). --bind is
# the placement of the ranks sc-run starts (ours; on a bed Gloo's too): core
# binds them round robin to the CPUs, as sc-run does by default; none leaves
# them to the scheduler. Default: core on this host, none on a bed, where
# every library then runs unbound as Open MPI does (an emulated host shares
# the machine's cores with every other host and with the kernel's network
# path). Open MPI's ranks are unbound either way. Needs:
# mpicc/mpirun (apt-get install openmpi-bin libopenmpi-dev) and python3-torch
# for the peers; a missing peer is reported as n/a.
set -u
ranks=""
minb=""
maxb=""
factor=""
rounds=1
budget=""
miniters=""
json=""
skip=""
bed=""
bind=""
usage() { sed -n '2,46p' "$0"; }
die() { echo "allreduce_compare.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
  -n) ranks="$2"; shift 2 ;;
  -b) minb="$2"; shift 2 ;;
  -e) maxb="$2"; shift 2 ;;
  -f) factor="$2"; shift 2 ;;
  -r) rounds="$2"; shift 2 ;;
  -I) budget="$2"; shift 2 ;;
  -i) miniters="$2"; shift 2 ;;
  -J) json="$2"; shift 2 ;;
  --skip) skip=",$2,"; shift 2 ;;
  --bind) bind="$2"; shift 2 ;;
  --netbed) bed="${SC_NETBED:-scnb-0}"; shift ;;
  --netbed=*) bed="${1#--netbed=}"; shift ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown argument '$1' (see --help)" ;;
  esac
done

build="${SC_BUILD:-.}"
here="$(cd "$(dirname "$0")" && pwd)"
cmp_name=allreduce_compare.sh
. "$here/compare_lib.sh"
build="$(cd "$build" 2>/dev/null && pwd)" || die "SC_BUILD '$SC_BUILD' is not a directory"

link_bps=0
minwarm=2
if [ -n "$bed" ]; then
  . "$here/bed_lib.sh"
  bed_load
  cmp_bed_ranks
  minb=${minb:-1M} maxb=${maxb:-64M} factor=${factor:-16}
  budget=${budget:-128M} miniters=${miniters:-3}
  minwarm=1
fi
ranks=${ranks:-2 4} minb=${minb:-8} maxb=${maxb:-64M} factor=${factor:-4}
budget=${budget:-256M} miniters=${miniters:-10}

cmp_placement
cmp_cases 4
cmp_tmp

cmp_have_ours sc_allreduce_perf
cmp_mpicc "$tmp/mpi_allreduce" "$here/mpi_allreduce.c"
cmp_python

ours_algos="ring tree rd rabenseifner hier auto"
if [ -n "$bed" ]; then
  libs="ours-ring ours-tree ours-rd ours-rabenseifner ours-hier ours-auto mpi mpi-han gloo"
  launchers="ours mpi mpi-han gloo"
else
  libs="ours-shm mpi-shm ours-tcp mpi-tcp ours-ucx mpi-ucx gloo"
  launchers=$libs
fi

# ours on the bed: one launch per size, every algorithm alternating inside it
# (sc_allreduce_perf -a compare); its row is
#   size count ring tree rd rabenseifner auto best auto-pick auto/best
run_ours_bed() {
  local p=$1 log="$tmp/$1.ours.log" c s it w line a i
  for c in "${cases[@]}"; do
    IFS=: read -r s it w <<<"$c"
    line=$(timeout 900 "$build/sc-run" "${scbind[@]}" --netbed="$bed" -n "$p" --timeout 800 \
      "$build/sc_allreduce_perf" -a compare -b "$s" -e "$s" -n "$it" -w "$w" -d float -o sum \
      2>>"$log" | tee -a "$log" | awk '!/^#/ && NF >= 10 {print; exit}')
    i=3
    for a in $ours_algos; do
      local t
      t=$(echo "$line" | awk -v i="$i" '{print $i}')
      case "$t" in
      '' | n/a | *[!0-9.]*) echo "$s fail exit status or n/a, see below" >>"$tmp/$p.ours-$a.raw" ;;
      *) echo "$s $t" >>"$tmp/$p.ours-$a.raw" ;;
      esac
      i=$((i + 1))
    done
    [ -n "$line" ] && echo "$s $(echo "$line" | awk '{print $10}')" >>"$tmp/$p.autopick"
  done
}

# Open MPI on the bed (bed_lib.sh's bed_mpirun).
run_mpi_bed() { # run_mpi_bed P [han]: han = Open MPI's hierarchical collectives forced
  local p=$1 out="$tmp/$1.mpi${2:+-$2}.raw" log="$tmp/$1.mpi${2:+-$2}.log" coll=()
  [ "${2:-}" = han ] && coll=(--mca coll_han_priority 100)
  bed_mpirun "$p" "${coll[@]}" -- "$tmp/mpi_allreduce" "${cases[@]}" >>"$out" 2>>"$log" ||
    echo "${sizes[0]} fail exit status, see below" >>"$out"
}

# run_lib LIB P: appends "SIZE TIME_US" (or "SIZE fail WHY") lines to $tmp/P.LIB.raw
run_lib() {
  local lib=$1 p=$2 out="$tmp/$2.$1.raw" log="$tmp/$2.$1.log"
  case "$lib" in
  ours)
    [ "$have_ours" = 1 ] || { for a in $ours_algos; do echo "${sizes[0]} fail not built" >>"$tmp/$p.ours-$a.raw"; done; return; }
    run_ours_bed "$p"
    ;;
  mpi | mpi-han)
    [ "$have_mpi" = 1 ] || { echo "${sizes[0]} fail no MPI" >>"$out"; return; }
    if [ "$lib" = mpi-han ]; then run_mpi_bed "$p" han; else run_mpi_bed "$p"; fi
    ;;
  ours-*)
    [ "$have_ours" = 1 ] || { echo "${sizes[0]} fail not built" >>"$out"; return; }
    local tr=${lib#ours-} c
    for c in "${cases[@]}"; do
      IFS=: read -r s it w <<<"$c"
      local line
      line=$(timeout 600 "$build/sc-run" "${scbind[@]}" -n "$p" --timeout 500 -x SC_TRANSPORT="$tr" \
        "$build/sc_allreduce_perf" -b "$s" -e "$s" -n "$it" -w "$w" -d float -o sum 2>>"$log" |
        awk '!/^#/ && NF >= 8 {print $1, $6; exit}')
      if [ -n "$line" ]; then echo "$line" >>"$out"; else echo "$s fail exit status, see below" >>"$out"; fi
    done
    ;;
  mpi-*)
    [ "$have_mpi" = 1 ] || { echo "${sizes[0]} fail no MPI" >>"$out"; return; }
    local btl=(--mca pml ob1 --mca btl vader,self)
    [ "$lib" = mpi-tcp ] && btl=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
    # Open MPI takes pml ucx by default only over RDMA devices: "any" lets it
    # run over UCX's shared memory and TCP as ours-ucx does.
    [ "$lib" = mpi-ucx ] && btl=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any)
    # pml ob1 so that the btl choice is what carries the data (mpi-ucx: pml ucx);
    # unbound (--bind core binds ours only: the output says where each runs).
    timeout 1200 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$p" \
      "${btl[@]}" "$tmp/mpi_allreduce" "${cases[@]}" >>"$out" 2>>"$log" </dev/null ||
      echo "${sizes[0]} fail exit status, see below" >>"$out"
    ;;
  gloo)
    [ -n "$py" ] || { echo "${sizes[0]} fail no torch" >>"$out"; return; }
    if [ -n "$bed" ]; then
      timeout 1200 "$build/sc-run" "${scbind[@]}" --netbed="$bed" -n "$p" --timeout 1100 \
        "$py" "$here/gloo_allreduce.py" --sc-run "${cases[@]}" >>"$out" 2>>"$log" ||
        echo "${sizes[0]} fail exit status, see below" >>"$out"
    else
      timeout 1200 "$py" "$here/gloo_allreduce.py" -n "$p" "${cases[@]}" >>"$out" 2>>"$log" </dev/null ||
        echo "${sizes[0]} fail exit status, see below" >>"$out"
    fi
    ;;
  esac
}

cmp_rounds
cmp_best

echo "# all-reduce float32 sum on $(hostname), $(nproc) CPUs, $(date -u +%FT%TZ); rounds=$rounds;" \
  "load average $load_start at the start, $load_end at the end"
echo "# placement: $placement"
echo "# time: slowest rank's average (us); busbw GB/s = size/time x 2(P-1)/P"
if [ -n "$bed" ]; then
  echo "# bed $bed: $nb_hosts hosts x $nb_m rank(s) at $nb_rate; ranks placed consecutively"
  echo "# cells: busbw GB/s (fraction of the link rate $(awk -v b="$link_bps" 'BEGIN {printf "%.4g", b / 8e9}') GB/s," \
    "ring all-reduce's limit; one TCP stream carries about 0.956)"
  echo "# best: ours' fastest algorithm; x/mpi, x/gloo: ours' best time / the peer's time (< 1: ours faster)"
  echo "# iterations per size (size:iters:warmup): ${cases[*]}"
else
  echo "# ratios are ours' time / the peer's time (< 1: ours faster); n/a: failed or not available"
fi
for p in $ranks; do
  echo
  echo "## P=$p"
  if [ -n "$bed" ]; then
    awk -v p="$p" -v libs="$libs" -v dir="$tmp" -v sizes="${sizes[*]}" -v link="$link_bps" '
      function bw(s, t) { return s / (t * 1e3) * 2 * (p - 1) / p }
      function cell(s, t) { return t == "" ? "n/a" : sprintf("%.4f (%.2f)", bw(s, t), bw(s, t) * 8e9 / link) }
      function ratio(a, b) { return (a == "" || b == "") ? "n/a" : sprintf("%.2f", a / b) }
      BEGIN {
        nl = split(libs, L, " "); ns = split(sizes, S, " ")
        for (i = 1; i <= nl; i++) {
          f = dir "/" p "." L[i]
          while ((getline line < f) > 0) { split(line, a, " "); T[L[i], a[1]] = a[2] }
          close(f)
        }
        f = dir "/" p ".autopick"
        while ((getline line < f) > 0) { split(line, a, " "); AP[a[1]] = a[2] }
        printf "%10s", "size"
        for (i = 1; i <= nl; i++) { n = L[i]; sub(/^ours-/, "", n); printf " %15s", n }
        printf " %12s %9s %9s %13s\n", "best", "best/mpi", "best/gloo", "auto picks"
        for (j = 1; j <= ns; j++) {
          s = S[j]; printf "%10d", s
          best = ""; bn = "n/a"
          for (i = 1; i <= nl; i++) {
            t = T[L[i], s]; printf " %15s", cell(s, t)
            if (L[i] ~ /^ours-/ && t != "" && (best == "" || t + 0 < best + 0)) { best = t; bn = L[i] }
          }
          sub(/^ours-/, "", bn)
          printf " %12s %9s %9s %13s\n", bn, ratio(best, T["mpi", s]), ratio(best, T["gloo", s]),
            (s in AP) ? AP[s] : "n/a"
        }
      }'
    continue
  fi
  awk -v p="$p" -v libs="$libs" -v dir="$tmp" -v sizes="${sizes[*]}" '
    function fmt_t(t) { return t == "" ? "n/a" : (t < 1000 ? sprintf("%.1f", t) : sprintf("%.0f", t)) }
    function fmt_bw(s, t) { return t == "" ? "n/a" : sprintf("%.3f", s / (t * 1e3) * 2 * (p - 1) / p) }
    function ratio(a, b) { return (a == "" || b == "") ? "n/a" : sprintf("%.2f", a / b) }
    BEGIN {
      nl = split(libs, L, " "); ns = split(sizes, S, " ")
      for (i = 1; i <= nl; i++) {
        f = dir "/" p "." L[i]
        while ((getline line < f) > 0) { split(line, a, " "); T[L[i], a[1]] = a[2] }
        close(f)
      }
      printf "%10s", "size"
      for (i = 1; i <= nl; i++) printf " %11s %8s", L[i] "_us", "GB/s"
      printf " %9s %9s %9s %9s %9s\n", "shm/mpi", "tcp/gloo", "tcp/mpi", "ucx/mpiu", "ucx/shm"
      for (j = 1; j <= ns; j++) {
        s = S[j]; printf "%10d", s
        for (i = 1; i <= nl; i++) { t = T[L[i], s]; printf " %11s %8s", fmt_t(t), fmt_bw(s, t) }
        printf " %9s %9s %9s %9s %9s\n", ratio(T["ours-shm", s], T["mpi-shm", s]),
          ratio(T["ours-tcp", s], T["gloo", s]), ratio(T["ours-tcp", s], T["mpi-tcp", s]),
          ratio(T["ours-ucx", s], T["mpi-ucx", s]), ratio(T["ours-ucx", s], T["ours-shm", s])
      }
    }'
done

if [ -n "$json" ]; then
  {
    printf '{\n  "benchmark": "allreduce_compare", "dtype": "float32", "op": "sum",\n'
    cmp_json_runs '2 * (p - 1) / p'
  } >"$json"
  note "JSON written to $json"
fi
