#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Growth with the rank count: for P = MIN, 2 MIN, 4 MIN, ... up to MAX ranks
# on this host, over tcp and over shm (SC_TRANSPORT), each rank of one job
# runs sc_scale_probe (perf/scale_probe.c) under sc-run and prints one JSON
# line: communicator creation time (wall and CPU seconds), the first 8-byte
# and the first 1 MiB all-reduce after it, peak resident memory (VmHWM),
# shared memory (the blocks of the rank's own segments, read through
# /proc/self/map_files, which takes root or CAP_CHECKPOINT_RESTORE, else
# shown as 0; and RssShmem, the shared pages it touched) and descriptors
# (/proc/self/fd). Open MPI runs the same probe
# (perf/compare/mpi_scale_probe.c, built with mpicc) under
# `mpirun --oversubscribe -np P` with --mca btl tcp,self (tcp) and
# vader,self (shm), side by side. The table shows rank 0 and the worst rank;
# times are the slowest rank's.
#
# Usage (from a build directory, or with SC_BUILD=dir):
#   scale.sh [--min P] [--max P] [--transports "tcp shm"] [--connect eager|lazy|eager,lazy]
#            [--skip ours|mpi] [--timeout SEC] [--nofile N] [--suite] [--out DIR]
#            [--netbed[=scnb-ID]]
# --min 16 and --max 1024 by default (powers of two from MIN); --connect sets
# SC_CONNECT for ours (default: the library's default, shown as "default");
# --timeout bounds each job (default 600 s; a job that runs out or fails shows
# n/a and a '#' line says why, and the larger P of that row are skipped).
# --nofile N runs each of our ranks under a descriptor limit of N, soft and
# hard (sh's ulimit before the probe starts; Open MPI's ranks keep the
# caller's limits).
# --suite: our ranks also run the quick conformance suite after the two
# all-reduces (sc_scale_probe --suite: every collective and a ring shift once,
# checked); the table adds its time and the descriptors after it.
# --out DIR (default: a fresh temporary folder, printed) receives scale.md
# (the table), scale.csv (one row per job) and the ranks' lines (*.jsonl).
# --netbed runs on an sc-netbed emulated cluster instead (root; default bed
# $SC_NETBED or scnb-0, up to its hosts x ranks per host): ours under
# `sc-run --netbed` with SC_TRANSPORT=auto (shm inside a host, tcp between),
# shown as transport "bed", Open MPI through bed_lib.sh's bed_mpirun.
# Needs: mpicc/mpirun (apt-get install openmpi-bin libopenmpi-dev) for the
# Open MPI rows; without them they are skipped with a '#' line. Our ranks
# run .libs/sc_scale_probe where sc_scale_probe is libtool's wrapper script.
set -u
minp=16
maxp=1024
transports="tcp shm"
bed=""
connects=""
skip=","
jobtimeout=600
out=""
nofile=""
suite=()
usage() { sed -n '2,39p' "$0"; }
die() { echo "scale.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
  --min) minp="$2"; shift 2 ;;
  --max) maxp="$2"; shift 2 ;;
  --transports) transports="$2"; shift 2 ;;
  --connect) connects="$2"; shift 2 ;;
  --skip) skip=",$2,"; shift 2 ;;
  --timeout) jobtimeout="$2"; shift 2 ;;
  --nofile) nofile="$2"; shift 2 ;;
  --suite) suite=(--suite); shift ;;
  --out) out="$2"; shift 2 ;;
  --netbed) bed="${SC_NETBED:-scnb-0}"; shift ;;
  --netbed=*) bed="${1#--netbed=}"; shift ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ "$minp" -ge 2 ] 2>/dev/null || die "--min must be an integer >= 2"
[ "$maxp" -ge "$minp" ] 2>/dev/null || die "--max must be an integer >= --min ($minp)"
[ "$maxp" -le 4096 ] || die "--max $maxp: sc-run launches at most 4096 ranks"
[ "$jobtimeout" -ge 1 ] 2>/dev/null || die "--timeout must be >= 1"
[ -z "$nofile" ] || [ "$nofile" -ge 64 ] 2>/dev/null || die "--nofile must be an integer >= 64"
for t in $transports; do
  case "$t" in tcp | shm) ;; *) die "--transports: expected tcp and/or shm, got '$t'" ;; esac
done
connects=${connects//,/ }
for c in $connects; do
  case "$c" in eager | lazy) ;; *) die "--connect: expected eager, lazy or both, got '$c'" ;; esac
done
[ -n "$connects" ] || connects=default

build="${SC_BUILD:-.}"
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "$build" 2>/dev/null && pwd)" || die "SC_BUILD '$SC_BUILD' is not a directory"
if [ -n "$bed" ]; then
  # shellcheck source=perf/compare/bed_lib.sh
  . "$here/compare/bed_lib.sh"
  bed_load
  transports=bed
  [ "$maxp" -le $((nb_hosts * nb_m)) ] || maxp=$((nb_hosts * nb_m))
  [ "$minp" -le "$maxp" ] || die "--min $minp: the bed $bed has $nb_hosts hosts x $nb_m ranks"
fi
if [ -z "$out" ]; then
  out=$(mktemp -d /tmp/sc-scale.XXXXXX) || die "cannot make a temporary folder"
fi
mkdir -p "$out" || die "cannot make $out"
note() { echo "# $*"; }
skipped() { case "$skip" in *",$1,"*) return 0 ;; esac; return 1; }

have_ours=0
if ! skipped ours; then
  have_ours=1
  for b in sc-run sc_scale_probe; do
    [ -x "$build/$b" ] || { note "ours: $build/$b not found (run from a build directory or set SC_BUILD)"; have_ours=0; }
  done
fi
# In a build with the shared library, $build/sc_scale_probe is libtool's
# wrapper: a bash script that runs sed and then execs .libs/sc_scale_probe
# with the build's library path. Starting P of them on 2 cores took longer
# than the ranks' creation itself, and a rank's creation time counts the
# wait for the last rank to start; the ranks run the program itself, as
# Open MPI's do.
probe=("$build/sc_scale_probe")
probe_env=()
if [ "$have_ours" = 1 ] && [ -x "$build/.libs/sc_scale_probe" ] &&
  [ "$(head -c 2 "$build/sc_scale_probe")" = '#!' ]; then
  probe=("$build/.libs/sc_scale_probe")
  probe_env=(LD_LIBRARY_PATH="$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi
have_mpi=0
if ! skipped mpi; then
  if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    if mpicc -O2 -I"$here/.." -o "$out/mpi_scale_probe" "$here/compare/mpi_scale_probe.c" 2>"$out/mpicc.err"; then
      have_mpi=1
    else
      note "mpi: mpicc failed: $(head -c 300 "$out/mpicc.err")"
    fi
  else
    note "mpi: mpicc/mpirun not found (apt-get install -y openmpi-bin libopenmpi-dev)"
  fi
fi
root_flag=()
[ "$(id -u)" = 0 ] && root_flag=(--allow-run-as-root)

csv="$out/scale.csv"
md="$out/scale.md"
echo "lib,transport,connect,nranks,ok_ranks,job_s,init_s_rank0,init_s_max,init_cpu_s_mean,calls_cpu_s_mean,ar8_s_max,ar1m_s_max,hwm_mib_rank0,hwm_mib_max,shmem_mib_rank0,shmem_mib_max,owned_mib_rank0,owned_mib_max,fds_init_rank0,fds_rank0,fds_max,suite_s_max,fds_suite_rank0,fds_suite_max" >"$csv"

# summarize FILE LIB TP CONN P JOB_S: one CSV row from the ranks' JSON lines.
summarize() {
  awk -v lib="$2" -v tp="$3" -v conn="$4" -v p="$5" -v job="$6" '
    function num(key,   m) {
      if (match($0, "\"" key "\":-?[0-9.]+")) {
        m = substr($0, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); return m + 0
      }
      return -1
    }
    /^\{/ && /"ok":/ {
      n++; ok += num("ok"); r = num("rank")
      i = num("init_s"); a = num("ar8_s"); b = num("ar1m_s")
      ic += num("init_cpu_s"); cc += num("calls_cpu_s")
      h = num("hwm_kb") / 1024; s = num("shmem_kb") / 1024; f = num("fds")
      o = num("shm_owned_kb"); o = o < 0 ? 0 : o / 1024
      if (i > imax) imax = i; if (a > amax) amax = a; if (b > bmax) bmax = b
      if (h > hmax) hmax = h; if (s > smax) smax = s; if (f > fmax) fmax = f; if (o > omax) omax = o
      if (r == 0) { i0 = i; h0 = h; s0 = s; o0 = o; f0 = f; fi0 = num("fds_init") }
      # The suite fields: -1 where it did not run (and in the Open MPI probe).
      if (num("suite") == 1) {
        su++; t = num("suite_s"); g = num("fds_suite")
        if (t > tmax) tmax = t; if (g > gmax) gmax = g; if (r == 0) g0 = g
      }
    }
    END {
      if (n == 0) { printf "%s,%s,%s,%d,0,%s,,,,,,,,,,,,,,,,,,\n", lib, tp, conn, p, job; exit }
      printf "%s,%s,%s,%d,%d,%s,%.4f,%.4f,%.4f,%.4f,%.6f,%.6f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%d,%d,%d,",
        lib, tp, conn, p, ok, job, i0, imax, ic / n, cc / n, amax, bmax, h0, hmax, s0, smax, o0, omax, fi0, f0, fmax
      if (su == n) printf "%.4f,%d,%d\n", tmax, g0, gmax; else printf ",,\n"
    }' "$1"
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# run_job LIB TP CONN P: one launch, its CSV row; 1 when the job failed.
run_job() {
  local lib=$1 tp=$2 conn=$3 p=$4 tag="$1-$2-$3-$4" t0 t1 st
  local log="$out/$tag.log" lines="$out/$tag.jsonl"
  t0=$(now)
  if [ "$lib" = sc ]; then
    local env=(SC_TRANSPORT="$tp") where=()
    [ "$tp" = bed ] && env=(SC_TRANSPORT=auto) where=(--netbed="$bed")
    local prog=("${probe[@]}" "${suite[@]}")
    env+=("${probe_env[@]}")
    [ "$conn" != default ] && env+=(SC_CONNECT="$conn")
    # shellcheck disable=SC2016 # $0 is the probe, expanded by the rank's sh
    [ -n "$nofile" ] && prog=(sh -c "ulimit -Sn $nofile && ulimit -Hn $nofile && exec \"\$0\" \"\$@\"" "${prog[@]}")
    env "${env[@]}" "$build/sc-run" "${where[@]}" -n "$p" --timeout "$jobtimeout" \
      "${prog[@]}" >"$lines" 2>"$log"
    st=$?
  elif [ "$tp" = bed ]; then
    bed_mpirun "$p" -- "$out/mpi_scale_probe" >"$lines" 2>"$log"
    st=$?
  else
    local btl=tcp,self
    [ "$tp" = shm ] && btl=vader,self
    OMPI_MCA_pml=ob1 OMPI_MCA_btl=$btl timeout "$jobtimeout" mpirun "${root_flag[@]}" \
      --oversubscribe -np "$p" "$out/mpi_scale_probe" >"$lines" 2>"$log"
    st=$?
  fi
  t1=$(now)
  summarize "$lines" "$lib" "$tp" "$conn" "$p" "$(elapsed "$t0" "$t1")" >>"$csv"
  if [ "$st" -ne 0 ]; then
    note "$tag: exit status $st; $(tail -n 2 "$log" | tr '\n' ' ' | head -c 300)"
    return 1
  fi
  note "$tag: $(elapsed "$t0" "$t1") s"
  return 0
}

jobs=()
for tp in $transports; do
  if [ "$have_ours" = 1 ]; then for c in $connects; do jobs+=("sc $tp $c"); done; fi
  [ "$have_mpi" = 1 ] && jobs+=("mpi $tp mpi")
done
[ "${#jobs[@]}" -gt 0 ] || die "nothing to run"
declare -A dead=()
for ((p = minp; p <= maxp; p *= 2)); do
  for j in "${jobs[@]}"; do
    [ -n "${dead[$j]:-}" ] && continue
    # shellcheck disable=SC2086
    run_job $j "$p" || dead[$j]=1
  done
done

{
  echo "| P | library | transport | connect | creation s (rank 0 / max) | creation CPU s (mean) | first 8 B ms | first 1 MiB ms | peak RSS MiB (rank 0 / max) | shared MiB owned (rank 0 / max) | shared MiB resident (max) | descriptors (rank 0 / max) | suite s (max) | descriptors after the suite (rank 0 / max) | job s |"
  echo "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  tail -n +2 "$csv" | sort -t, -k4,4n -k2,2 -k1,1r -k3,3 | awk -F, '
    {
      lib = $1 == "sc" ? "ours" : "Open MPI"
      if ($5 != $4 || $7 == "") {
        printf "| %s | %s | %s | %s | n/a (%s of %s ranks ok) | | | | | | | | | | %s |\n", $4, lib, $2, $3, $5, $4, $6
        next
      }
      st = $22 == "" ? "-" : sprintf("%.3f", $22)
      sf = $22 == "" ? "-" : sprintf("%d / %d", $23, $24)
      printf "| %s | %s | %s | %s | %.3f / %.3f | %.3f | %.1f | %.1f | %.1f / %.1f | %.1f / %.1f | %.1f | %d / %d | %s | %s | %s |\n",
        $4, lib, $2, $3, $7, $8, $9, $11 * 1000, $12 * 1000, $13, $14, $17, $18, $16, $20, $21, st, sf, $6
    }'
} >"$md"
cat "$md"
note "table: $md; one row per job: $csv; the ranks' lines: $out/*.jsonl"
