#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# libsparsecoll's all-to-all against Open MPI and Gloo on this host, in one
# run, libraries alternating, same sizes, iteration counts and elements (see
# docs/BENCHMARKING.md):
#   ours-shm  sc-run + sc_alltoall_perf, SC_TRANSPORT=shm (the cost model's
#             algorithm unless -a)
#   mpi-shm   Open MPI MPI_Alltoall, --mca btl vader,self
#   ours-tcp  sc-run + sc_alltoall_perf, SC_TRANSPORT=tcp
#   mpi-tcp   Open MPI MPI_Alltoall, --mca btl tcp,self over lo
#   gloo      torch.distributed all_to_all_single, backend gloo over lo
# On an sc-netbed emulated cluster (--netbed[=scnb-ID], root; ranks placed as
# sc-run --netbed places them: consecutive ranks share a host):
#   ours-ALGO sc-run --netbed + sc_alltoall_perf -a compare: pairwise, bruck,
#             hier forced and auto, in one launch per size (-v: ours-auto only,
#             the pairwise exchange; sc_alltoall_perf -v -a compare runs the
#             uneven form's pairwise, sparse and hier side by side)
#   mpi       mpirun inside host 0 (perf/compare/bed_lib.sh), btl tcp between
#             hosts, vader inside one
#   gloo      gloo_alltoall.py --sc-run under sc-run --netbed
#   sockets   tcp_alltoall.c under sc-run --netbed: plain TCP sockets, a
#             thread per flow, no library in the data path (not with -v):
#             what the bed's hosts reach at all, the ceiling for everyone
#   and each cell also gives the time's fraction of what the link allows: a
#   host of m ranks sends and receives m x size x (P-m)/P bytes through its
#   link (uniform all-to-all only).
# With -v every library runs the uneven all-to-all of mixture-of-experts
# dispatch instead (sc_alltoallv, MPI_Alltoallv, all_to_all_single with
# splits) on the same P x P count matrix (perf/a2a_matrix.h, from --seed and
# --skew; sc_alltoall_perf --help). With --op sendrecv every library runs
# nccl-tests' sendrecv instead: each rank sends size bytes to rank + 1 and
# receives rank - 1's (sc_sendrecv_perf, MPI_Sendrecv, isend/irecv), busbw =
# size / time.
# uint8 elements, so that every size down to P bytes splits into P blocks; a
# size is the bytes of one rank's send buffer. time = slowest rank's average
# per operation (us), busbw = size / time x (P-1)/P (GB/s, 1e9 B), as
# nccl-tests' alltoall_perf. Iterations per size: BUDGET / size clamped to
# MIN..2000 (-I BUDGET, -i MIN; default 256 MiB and 10), warm-up a tenth
# (>= 2). Every library checks one operation per size; a library or size
# that fails shows n/a and a '#' line says why.
#
# Usage (from a build directory, or with SC_BUILD=dir):
#   alltoall_compare.sh [-n "2 4 8"] [-b 8] [-e 64M] [-f 4] [-r ROUNDS] [-I BYTES]
#                       [-i MIN] [-a ALGO] [-v [--seed N] [--skew S]] [-J FILE]
#                       [--skip LIB,...] [--op alltoall|sendrecv] [--bind core|none]
#                       [--netbed[=scnb-ID]]
# On a bed -n defaults to all its ranks, -I/-i to 128M/3, the warm-up to a
# tenth (>= 1). -r ROUNDS repeats the whole alternation and keeps each cell's
# best time. -a forces our algorithm (pairwise, bruck, hier; sendrecv: group,
# isend; not on a bed, where every all-to-all one runs). --skip takes the
# names above (on a bed: ours, mpi, gloo, sockets). --bind is the placement
# of the ranks sc-run starts (ours; on a bed Gloo's and the sockets' too):
# core binds them round robin to the CPUs, as sc-run does by default; none
# leaves them to the scheduler. Default: core on this host, none on a bed,
# where every library then runs unbound as Open MPI does (an emulated host
# shares the machine's cores with every other host and with the kernel's
# network path). Open MPI's ranks are unbound either way.
# The last table gives, per size and P, ours' time over the fastest of the
# other libraries (< 1: ours faster). Needs: mpicc/mpirun (apt-get install
# openmpi-bin libopenmpi-dev) and python3-torch for the peers; a missing peer
# is reported as n/a.
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
algo=""
uneven=0
seed=1
skew=1
bed=""
bind=""
op=alltoall
usage() { sed -n '2,61p' "$0"; }
die() { echo "alltoall_compare.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
  -n) ranks="$2"; shift 2 ;;
  -b) minb="$2"; shift 2 ;;
  -e) maxb="$2"; shift 2 ;;
  -f) factor="$2"; shift 2 ;;
  -r) rounds="$2"; shift 2 ;;
  -I) budget="$2"; shift 2 ;;
  -i) miniters="$2"; shift 2 ;;
  -a) algo="$2"; shift 2 ;;
  -v) uneven=1; shift ;;
  --seed) seed="$2"; shift 2 ;;
  --skew) skew="$2"; shift 2 ;;
  -J) json="$2"; shift 2 ;;
  --skip) skip=",$2,"; shift 2 ;;
  --op) op="$2"; shift 2 ;;
  --bind) bind="$2"; shift 2 ;;
  --netbed) bed="${SC_NETBED:-scnb-0}"; shift ;;
  --netbed=*) bed="${1#--netbed=}"; shift ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown argument '$1' (see --help)" ;;
  esac
done

build="${SC_BUILD:-.}"
here="$(cd "$(dirname "$0")" && pwd)"
cmp_name=alltoall_compare.sh
. "$here/compare_lib.sh"
build="$(cd "$build" 2>/dev/null && pwd)" || die "SC_BUILD '$SC_BUILD' is not a directory"

link_bps=0
minwarm=2
if [ -n "$bed" ]; then
  . "$here/bed_lib.sh"
  bed_load
  cmp_bed_ranks
  budget=${budget:-128M} miniters=${miniters:-3}
  minwarm=1
  [ -z "$algo" ] || die "-a: on a bed every algorithm runs (sc_alltoall_perf -a compare)"
fi
ranks=${ranks:-2 4 8} minb=${minb:-8} maxb=${maxb:-64M} factor=${factor:-4}
budget=${budget:-256M} miniters=${miniters:-10}
case "$seed" in '' | *[!0-9]*) die "--seed must be a non-negative integer" ;; esac
case "$skew" in 0 | 1 | 2) ;; *) die "--skew must be 0, 1 or 2" ;; esac
for p in $ranks; do [ "$p" -ge 2 ] 2>/dev/null || die "-n: '$p' is not a rank count >= 2"; done

cmp_placement
cmp_cases 1
vargs=()
[ "$uneven" = 1 ] && vargs=(-v --seed "$seed" --skew "$skew")
# --op: our program, the peers' arguments, and busbw's factor (sr: 1, else (P-1)/P).
perf=sc_alltoall_perf pargs=("${vargs[@]}") sr=0
case "$op" in
alltoall) ;;
sendrecv)
  [ "$uneven" = 1 ] && die "--op sendrecv has no -v"
  perf=sc_sendrecv_perf pargs=(--sendrecv) sr=1
  ;;
*) die "--op must be alltoall or sendrecv" ;;
esac

cmp_tmp

cmp_have_ours "$perf"
cmp_mpicc "$tmp/mpi_alltoall" "$here/mpi_alltoall.c" -I "$here/../.."
cmp_python
have_sockets=0
if [ -n "$bed" ] && [ "$uneven" = 0 ]; then
  if ${CC:-cc} -O2 -I "$here/../../include" -I "$build/include" -o "$tmp/tcp_alltoall" \
    "$here/tcp_alltoall.c" -L"$build/.libs" -lsparsecoll -lpthread -Wl,-rpath,"$build/.libs" \
    2>"$tmp/cc.err"; then
    have_sockets=1
  else
    note "sockets: cc failed: $(head -c 300 "$tmp/cc.err")"
  fi
fi

if [ -n "$bed" ]; then
  ours_algos="pairwise bruck hier auto"
  [ "$uneven" = 1 ] || [ "$sr" = 1 ] && ours_algos=auto
  libs="$(for a in $ours_algos; do printf 'ours-%s ' "$a"; done)mpi gloo"
  launchers="ours mpi gloo"
  others="mpi gloo"
  [ "$uneven" = 0 ] && libs="$libs sockets" launchers="$launchers sockets"
else
  libs="ours-shm mpi-shm ours-tcp mpi-tcp gloo"
  launchers=$libs
  others="mpi-shm mpi-tcp gloo"
fi

# ours on the bed: one launch per size; every algorithm alternating inside it
# (sc_alltoall_perf -a compare; its row: size count pairwise bruck hier auto
# best auto-pick auto/best), or with -v or --op sendrecv the one way (a plain
# row, time and #wrong of the out-of-place columns).
run_ours_bed() {
  local p=$1 log="$tmp/$1.ours.log" c s it w line a i t
  for c in "${cases[@]}"; do
    IFS=: read -r s it w <<<"$c"
    if [ "$ours_algos" = auto ]; then
      line=$(timeout 900 "$build/sc-run" "${scbind[@]}" --netbed="$bed" -n "$p" --timeout 800 \
        "$build/$perf" -b "$s" -e "$s" -n "$it" -w "$w" -d uint8 "${vargs[@]}" \
        2>>"$log" | tee -a "$log" | awk '!/^#/ && NF >= 9 {print $6, $9; exit}')
      set -- $line
      if [ $# -eq 2 ] && [ "$2" = 0 ]; then
        echo "$s $1" >>"$tmp/$p.ours-auto.raw"
      else
        echo "$s fail wrong elements or exit status, see below" >>"$tmp/$p.ours-auto.raw"
      fi
      continue
    fi
    line=$(timeout 900 "$build/sc-run" "${scbind[@]}" --netbed="$bed" -n "$p" --timeout 800 \
      "$build/sc_alltoall_perf" -a compare -b "$s" -e "$s" -n "$it" -w "$w" -d uint8 \
      2>>"$log" | tee -a "$log" | awk '!/^#/ && NF >= 9 {print; exit}')
    i=3
    for a in $ours_algos; do
      t=$(echo "$line" | awk -v i="$i" '{print $i}')
      case "$t" in
      '' | n/a | *[!0-9.]*) echo "$s fail exit status or n/a, see below" >>"$tmp/$p.ours-$a.raw" ;;
      *) echo "$s $t" >>"$tmp/$p.ours-$a.raw" ;;
      esac
      i=$((i + 1))
    done
    [ -n "$line" ] && echo "$s $(echo "$line" | awk '{print $8}')" >>"$tmp/$p.autopick"
  done
}

# run_lib LIB P: appends "SIZE TIME_US" (or "SIZE fail WHY") lines to $tmp/P.LIB.raw
run_lib() {
  local lib=$1 p=$2 out="$tmp/$2.$1.raw" log="$tmp/$2.$1.log"
  case "$lib" in
  ours)
    [ "$have_ours" = 1 ] || { for a in $ours_algos; do echo "${sizes[0]} fail not built" >>"$tmp/$p.ours-$a.raw"; done; return; }
    run_ours_bed "$p"
    ;;
  mpi)
    [ "$have_mpi" = 1 ] || { echo "${sizes[0]} fail no MPI" >>"$out"; return; }
    bed_mpirun "$p" -- "$tmp/mpi_alltoall" "${pargs[@]}" "${cases[@]}" >>"$out" 2>>"$log" ||
      echo "${sizes[0]} fail exit status, see below" >>"$out"
    ;;
  ours-*)
    [ "$have_ours" = 1 ] || { echo "${sizes[0]} fail not built" >>"$out"; return; }
    local tr=${lib#ours-} c s it w line a=()
    [ -n "$algo" ] && a=(-a "$algo")
    for c in "${cases[@]}"; do
      IFS=: read -r s it w <<<"$c"
      # The row's out-of-place time, and its #wrong: a result that failed
      # its check is no time.
      line=$(timeout 600 "$build/sc-run" "${scbind[@]}" -n "$p" --timeout 500 -x SC_TRANSPORT="$tr" \
        "$build/$perf" -b "$s" -e "$s" -n "$it" -w "$w" -d uint8 "${vargs[@]}" \
        "${a[@]}" 2>>"$log" | awk '!/^#/ && NF >= 9 {print $6, $9; exit}')
      set -- $line
      if [ $# -eq 2 ] && [ "$2" = 0 ]; then
        echo "$s $1" >>"$out"
      elif [ $# -eq 2 ]; then
        echo "$s fail $2 wrong elements" >>"$out"
      else
        echo "$s fail exit status, see below" >>"$out"
      fi
    done
    ;;
  mpi-*)
    [ "$have_mpi" = 1 ] || { echo "${sizes[0]} fail no MPI" >>"$out"; return; }
    local btl=(--mca pml ob1 --mca btl vader,self)
    [ "$lib" = mpi-tcp ] && btl=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
    # pml ob1 so that the btl choice is what carries the data; unbound (--bind core binds
    # ours only: the output says where each runs).
    timeout 1200 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$p" \
      "${btl[@]}" "$tmp/mpi_alltoall" "${pargs[@]}" "${cases[@]}" >>"$out" 2>>"$log" </dev/null ||
      echo "${sizes[0]} fail exit status, see below" >>"$out"
    ;;
  sockets)
    [ "$have_sockets" = 1 ] || { echo "${sizes[0]} fail not built" >>"$out"; return; }
    local sra=()
    [ "$sr" = 1 ] && sra=(--sendrecv)
    timeout 900 "$build/sc-run" "${scbind[@]}" --netbed="$bed" -n "$p" --timeout 800 "$tmp/tcp_alltoall" \
      "${sra[@]}" "${cases[@]}" >>"$out" 2>>"$log" ||
      echo "${sizes[0]} fail exit status, see below" >>"$out"
    ;;
  gloo)
    [ -n "$py" ] || { echo "${sizes[0]} fail no torch" >>"$out"; return; }
    if [ -n "$bed" ]; then
      timeout 1200 "$build/sc-run" "${scbind[@]}" --netbed="$bed" -n "$p" --timeout 1100 \
        "$py" "$here/gloo_alltoall.py" --sc-run "${pargs[@]}" "${cases[@]}" >>"$out" 2>>"$log" ||
        echo "${sizes[0]} fail exit status, see below" >>"$out"
    else
      timeout 1200 "$py" "$here/gloo_alltoall.py" -n "$p" "${pargs[@]}" "${cases[@]}" >>"$out" \
        2>>"$log" </dev/null || echo "${sizes[0]} fail exit status, see below" >>"$out"
    fi
    ;;
  esac
}

cmp_rounds
cmp_best

what="all-to-all (MPI_Alltoall, all_to_all_single)"
[ "$uneven" = 1 ] && what="uneven all-to-all (alltoallv; seed $seed, skew $skew)"
bwf=" x (P-1)/P"
[ "$sr" = 1 ] && what="sendrecv to rank + 1 (MPI_Sendrecv, isend/irecv)" bwf=""
echo "# $what, uint8, on $(hostname), $(nproc) CPUs, $(date -u +%FT%TZ); rounds=$rounds;" \
  "load average $load_start at the start, $load_end at the end${algo:+; ours forced to $algo}"
echo "# placement: $placement"
echo "# size: bytes of one rank's send buffer; time: slowest rank's average (us);" \
  "busbw GB/s = size/time$bwf"
if [ -n "$bed" ]; then
  echo "# bed $bed: $nb_hosts hosts x $nb_m rank(s) at $nb_rate; ranks placed consecutively"
  echo "# cells: time (us) and, uniform all-to-all only, its fraction of what the link allows (a host of m ranks"
  echo "# moves m x size x (P-m)/P bytes each way through its $(awk -v b="$link_bps" 'BEGIN {printf "%.4g", b / 8e9}') GB/s link)"
  echo "# best: ours' fastest algorithm; auto/mpi, auto/gloo, auto/sock: the cost model's pick's time / the"
  echo "# peer's (< 1: ours faster; sockets: plain TCP, no library); auto picks: what the cost model chose"
  echo "# iterations per size (size:iters:warmup): ${cases[*]}"
  for p in $ranks; do
    echo
    echo "## P=$p"
    awk -v p="$p" -v m="$nb_m" -v libs="$libs" -v dir="$tmp" -v sizes="${sizes[*]}" \
      -v link="$link_bps" -v uneven="$([ "$uneven" = 1 ] || [ "$sr" = 1 ] && echo 1 || echo 0)" '
      function frac(s, t) { mm = m < p ? m : p; return mm * s * (p - mm) / p * 8 / link / (t * 1e-6) }
      function cell(s, t) {
        if (t == "") return "n/a"
        return uneven ? sprintf("%.1f", t) : sprintf("%.1f (%.2f)", t, frac(s, t))
      }
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
        for (i = 1; i <= nl; i++) { n = L[i]; sub(/^ours-/, "", n); printf " %17s", n }
        printf " %9s %9s %9s %9s %10s\n", "best", "auto/mpi", "auto/gloo", "auto/sock", "auto picks"
        for (j = 1; j <= ns; j++) {
          s = S[j]; printf "%10d", s
          best = ""; bn = "n/a"
          for (i = 1; i <= nl; i++) {
            t = T[L[i], s]; printf " %17s", cell(s, t)
            if (L[i] ~ /^ours-/ && t != "" && (best == "" || t + 0 < best + 0)) { best = t; bn = L[i] }
          }
          sub(/^ours-/, "", bn)
          printf " %9s %9s %9s %9s %10s\n", bn, ratio(T["ours-auto", s], T["mpi", s]),
            ratio(T["ours-auto", s], T["gloo", s]), ratio(T["ours-auto", s], T["sockets", s]),
            (s in AP) ? AP[s] : "n/a"
        }
      }'
  done
else
  echo "# ratios are ours' time / the peer's time (< 1: ours faster); best: the fastest of" \
    "$others; n/a: failed or not available"
  for p in $ranks; do
    echo
    echo "## P=$p"
    awk -v p="$p" -v libs="$libs" -v others="$others" -v dir="$tmp" -v sizes="${sizes[*]}" -v sr="$sr" '
      function fmt_t(t) { return t == "" ? "n/a" : (t < 1000 ? sprintf("%.1f", t) : sprintf("%.0f", t)) }
      function fmt_bw(s, t) { return t == "" ? "n/a" : sprintf("%.3f", s / (t * 1e3) * (sr ? 1 : (p - 1) / p)) }
      function ratio(a, b) { return (a == "" || b == "") ? "n/a" : sprintf("%.2f", a / b) }
      BEGIN {
        nl = split(libs, L, " "); no = split(others, O, " "); ns = split(sizes, S, " ")
        for (i = 1; i <= nl; i++) {
          f = dir "/" p "." L[i]
          while ((getline line < f) > 0) { split(line, a, " "); T[L[i], a[1]] = a[2] }
          close(f)
        }
        printf "%10s", "size"
        for (i = 1; i <= nl; i++) printf " %11s %8s", L[i] "_us", "GB/s"
        printf " %8s %8s %8s %8s %8s %8s\n", "shm/mpi", "tcp/mpi", "tcp/gloo", "best", "shm/best", "tcp/best"
        for (j = 1; j <= ns; j++) {
          s = S[j]; printf "%10d", s
          for (i = 1; i <= nl; i++) { t = T[L[i], s]; printf " %11s %8s", fmt_t(t), fmt_bw(s, t) }
          best = ""; bn = "n/a"
          for (i = 1; i <= no; i++) {
            t = T[O[i], s]
            if (t != "" && (best == "" || t + 0 < best + 0)) { best = t; bn = O[i] }
          }
          printf " %8s %8s %8s %8s %8s %8s\n", ratio(T["ours-shm", s], T["mpi-shm", s]),
            ratio(T["ours-tcp", s], T["mpi-tcp", s]), ratio(T["ours-tcp", s], T["gloo", s]), bn,
            ratio(T["ours-shm", s], best), ratio(T["ours-tcp", s], best)
        }
      }'
  done

  # One table of the ratios: per size, ours over the fastest other library, every P.
  echo
  echo "## ours / fastest of $others (shm, tcp: our transport)"
  awk -v ranks="$ranks" -v others="$others" -v dir="$tmp" -v sizes="${sizes[*]}" '
    function ratio(a, b) { return (a == "" || b == "") ? "n/a" : sprintf("%.2f", a / b) }
    BEGIN {
      np = split(ranks, P, " "); no = split(others, O, " "); ns = split(sizes, S, " ")
      split("ours-shm ours-tcp " others, L, " ")
      for (k = 1; k <= np; k++)
        for (i = 1; i <= 2 + no; i++) {
          f = dir "/" P[k] "." L[i]
          while ((getline line < f) > 0) { split(line, a, " "); T[P[k], L[i], a[1]] = a[2] }
          close(f)
        }
      printf "%10s", "size"
      for (k = 1; k <= np; k++) printf " %9s %9s", "P" P[k] "-shm", "P" P[k] "-tcp"
      printf "\n"
      for (j = 1; j <= ns; j++) {
        s = S[j]; printf "%10d", s
        for (k = 1; k <= np; k++) {
          best = ""
          for (i = 1; i <= no; i++) {
            t = T[P[k], O[i], s]
            if (t != "" && (best == "" || t + 0 < best + 0)) best = t
          }
          printf " %9s %9s", ratio(T[P[k], "ours-shm", s], best), ratio(T[P[k], "ours-tcp", s], best)
        }
        printf "\n"
      }
    }'
fi

if [ -n "$json" ]; then
  {
    printf '{\n  "benchmark": "alltoall_compare", "op": "%s", "dtype": "uint8", "uneven": %s,' \
      "$op" "$([ "$uneven" = 1 ] && echo true || echo false)"
    [ "$uneven" = 1 ] && printf ' "seed": %s, "skew": %s,' "$seed" "$skew"
    printf '\n  "ours_algo": "%s",\n' "${algo:-auto}"
    if [ "$sr" = 1 ]; then cmp_json_runs 1; else cmp_json_runs '(p - 1) / p'; fi
  } >"$json"
  note "JSON written to $json"
fi
