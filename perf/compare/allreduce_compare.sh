#!/bin/bash
# libsparsecoll's all-reduce against Open MPI and Gloo on this host, in one
# run, libraries alternating, same sizes and iteration counts (see
# docs/BENCHMARKING.md):
#   ours-shm  sc-run + sc_allreduce_perf, SC_TRANSPORT=shm
#   mpi-shm   Open MPI MPI_Allreduce, --mca btl vader,self
#   ours-tcp  sc-run + sc_allreduce_perf, SC_TRANSPORT=tcp
#   mpi-tcp   Open MPI MPI_Allreduce, --mca btl tcp,self over lo
#   gloo      torch.distributed all_reduce, backend gloo over lo
# float32 sum; time = slowest rank's average per operation (us), busbw =
# size / time x 2(P-1)/P (GB/s, 1e9 B). Iterations per size: 256 MiB / size
# clamped to 10..2000 (-I changes the budget), warm-up a tenth (>= 2).
# A library or size that fails shows n/a and a '#' line says why.
#
# Usage (from a build directory, or with SC_BUILD=dir):
#   allreduce_compare.sh [-n "2 4"] [-b 8] [-e 64M] [-f 4] [-r ROUNDS] [-I BYTES]
#                        [-J FILE] [--skip LIB,...]
# -r ROUNDS repeats the whole alternation and keeps each cell's best time.
# Needs: mpicc/mpirun (apt-get install openmpi-bin libopenmpi-dev) and
# python3-torch for the peers; a missing peer is reported as n/a.
set -u
ranks="2 4"
minb=8
maxb=64M
factor=4
rounds=1
budget=$((256 << 20))
json=""
skip=""
usage() { sed -n '2,23p' "$0"; }
while [ $# -gt 0 ]; do
  case "$1" in
  -n) ranks="$2"; shift 2 ;;
  -b) minb="$2"; shift 2 ;;
  -e) maxb="$2"; shift 2 ;;
  -f) factor="$2"; shift 2 ;;
  -r) rounds="$2"; shift 2 ;;
  -I) budget="$2"; shift 2 ;;
  -J) json="$2"; shift 2 ;;
  --skip) skip=",$2,"; shift 2 ;;
  -h | --help) usage; exit 0 ;;
  *) echo "allreduce_compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

bytes() { # 8, 4K, 64M, 1G -> bytes
  local v=$1 m=1
  case "$v" in
  *[kK]) m=1024; v=${v%?} ;;
  *[mM]) m=$((1 << 20)); v=${v%?} ;;
  *[gG]) m=$((1 << 30)); v=${v%?} ;;
  esac
  case "$v" in '' | *[!0-9]*) echo "allreduce_compare.sh: bad size '$1'" >&2; exit 2 ;; esac
  echo $((v * m))
}
minb=$(bytes "$minb") || exit 2
maxb=$(bytes "$maxb") || exit 2
budget=$(bytes "$budget") || exit 2
[ "$factor" -ge 2 ] 2>/dev/null || { echo "allreduce_compare.sh: -f must be >= 2" >&2; exit 2; }
[ "$minb" -ge 4 ] || minb=4

sizes=()
for ((s = minb; s <= maxb; s *= factor)); do sizes+=("$((s / 4 * 4))"); done
[ "${sizes[-1]}" -lt "$maxb" ] && sizes+=("$((maxb / 4 * 4))")
cases=()
for s in "${sizes[@]}"; do
  it=$((budget / s))
  [ "$it" -lt 10 ] && it=10
  [ "$it" -gt 2000 ] && it=2000
  w=$((it / 10))
  [ "$w" -lt 2 ] && w=2
  cases+=("$s:$it:$w")
done

build="${SC_BUILD:-.}"
here="$(cd "$(dirname "$0")" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
note() { echo "# $*"; }

have_ours=1
for b in sc-run sc_allreduce_perf; do
  [ -x "$build/$b" ] || { note "ours: $build/$b not found (run from a build directory or set SC_BUILD)"; have_ours=0; }
done
have_mpi=0
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  if mpicc -O2 -o "$tmp/mpi_allreduce" "$here/mpi_allreduce.c" 2>"$tmp/mpicc.err"; then
    have_mpi=1
  else
    note "mpi: mpicc failed: $(head -c 300 "$tmp/mpicc.err")"
  fi
else
  note "mpi: mpicc/mpirun not found (apt-get install -y openmpi-bin libopenmpi-dev)"
fi
py=""
for cand in ${PYTHON:-} /usr/bin/python3 python3; do
  if "$cand" -c "import torch.distributed" >/dev/null 2>&1; then py=$cand; break; fi
done
[ -n "$py" ] || note "gloo: no python3 with torch (apt-get install -y python3-torch)"

libs="ours-shm mpi-shm ours-tcp mpi-tcp gloo"
skipped() { case "$skip" in *",$1,"*) return 0 ;; esac; return 1; }

# run_lib LIB P: appends "SIZE TIME_US" (or "SIZE fail WHY") lines to $tmp/P.LIB.raw
run_lib() {
  local lib=$1 p=$2 out="$tmp/$2.$1.raw" log="$tmp/$2.$1.log"
  case "$lib" in
  ours-*)
    [ "$have_ours" = 1 ] || { echo "${sizes[0]} fail not built" >>"$out"; return; }
    local tr=${lib#ours-} c
    for c in "${cases[@]}"; do
      IFS=: read -r s it w <<<"$c"
      local line
      line=$(timeout 600 "$build/sc-run" -n "$p" --timeout 500 -x SC_TRANSPORT="$tr" \
        "$build/sc_allreduce_perf" -b "$s" -e "$s" -n "$it" -w "$w" -d float -o sum 2>>"$log" |
        awk '!/^#/ && NF >= 8 {print $1, $6; exit}')
      if [ -n "$line" ]; then echo "$line" >>"$out"; else echo "$s fail exit status, see below" >>"$out"; fi
    done
    ;;
  mpi-*)
    [ "$have_mpi" = 1 ] || { echo "${sizes[0]} fail no MPI" >>"$out"; return; }
    local btl=(--mca btl vader,self)
    [ "$lib" = mpi-tcp ] && btl=(--mca btl tcp,self --mca btl_tcp_if_include lo)
    # pml ob1 so that the btl choice is what carries the data (not UCX);
    # no binding, like sc-run.
    timeout 1200 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$p" \
      --mca pml ob1 "${btl[@]}" "$tmp/mpi_allreduce" "${cases[@]}" >>"$out" 2>>"$log" </dev/null ||
      echo "${sizes[0]} fail exit status, see below" >>"$out"
    ;;
  gloo)
    [ -n "$py" ] || { echo "${sizes[0]} fail no torch" >>"$out"; return; }
    timeout 1200 "$py" "$here/gloo_allreduce.py" -n "$p" "${cases[@]}" >>"$out" 2>>"$log" </dev/null ||
      echo "${sizes[0]} fail exit status, see below" >>"$out"
    ;;
  esac
}

for r in $(seq "$rounds"); do
  for p in $ranks; do
    for lib in $libs; do
      skipped "$lib" && continue
      run_lib "$lib" "$p"
    done
  done
done

# best time per size over the rounds: $tmp/P.LIB -> "SIZE TIME" ("n/a" when every round failed)
for p in $ranks; do
  for lib in $libs; do
    raw="$tmp/$p.$lib.raw"
    [ -f "$raw" ] || : >"$raw"
    awk '$2 != "fail" { if (!($1 in b) || $2 + 0 < b[$1]) b[$1] = $2 + 0 }
         END { for (s in b) print s, b[s] }' "$raw" >"$tmp/$p.$lib"
    if grep -q " fail" "$raw"; then
      note "P=$p $lib: $(grep ' fail' "$raw" | head -3 | tr '\n' ';')"
      [ -s "$tmp/$p.$lib.log" ] && note "  $(grep -v '^$' "$tmp/$p.$lib.log" | tail -3 | tr '\n' ' ' | head -c 400)"
    fi
  done
done

echo "# all-reduce float32 sum on $(hostname), $(nproc) CPUs, $(date -u +%FT%TZ); rounds=$rounds"
echo "# time: slowest rank's average (us); busbw GB/s = size/time x 2(P-1)/P; ratios are"
echo "# ours' time / the peer's time (< 1: ours faster); n/a: failed or not available"
for p in $ranks; do
  echo
  echo "## P=$p"
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
      printf " %9s %9s %9s\n", "shm/mpi", "tcp/gloo", "tcp/mpi"
      for (j = 1; j <= ns; j++) {
        s = S[j]; printf "%10d", s
        for (i = 1; i <= nl; i++) { t = T[L[i], s]; printf " %11s %8s", fmt_t(t), fmt_bw(s, t) }
        printf " %9s %9s %9s\n", ratio(T["ours-shm", s], T["mpi-shm", s]),
          ratio(T["ours-tcp", s], T["gloo", s]), ratio(T["ours-tcp", s], T["mpi-tcp", s])
      }
    }'
done

if [ -n "$json" ]; then
  {
    printf '{\n  "benchmark": "allreduce_compare", "dtype": "float32", "op": "sum",\n'
    printf '  "host": "%s", "cpus": %d, "date": "%s", "rounds": %d,\n' "$(hostname)" "$(nproc)" \
      "$(date -u +%FT%TZ)" "$rounds"
    printf '  "iterations": ['
    sep=""
    for c in "${cases[@]}"; do
      IFS=: read -r s it w <<<"$c"
      printf '%s{"bytes": %d, "iters": %d, "warmup": %d}' "$sep" "$s" "$it" "$w"
      sep=", "
    done
    printf '],\n  "results": ['
    sep=""
    for p in $ranks; do
      for lib in $libs; do
        for s in "${sizes[@]}"; do
          t=$(awk -v s="$s" '$1 == s {print $2}' "$tmp/$p.$lib")
          if [ -n "$t" ]; then
            bw=$(awk -v s="$s" -v t="$t" -v p="$p" 'BEGIN {printf "%.6f", s / (t * 1e3) * 2 * (p - 1) / p}')
            printf '%s\n    {"nranks": %d, "library": "%s", "bytes": %d, "time_us": %s, "busbw_gbs": %s}' \
              "$sep" "$p" "$lib" "$s" "$t" "$bw"
          else
            printf '%s\n    {"nranks": %d, "library": "%s", "bytes": %d, "time_us": null, "busbw_gbs": null}' \
              "$sep" "$p" "$lib" "$s"
          fi
          sep=","
        done
      done
    done
    printf '\n  ]\n}\n'
  } >"$json"
  note "JSON written to $json"
fi
