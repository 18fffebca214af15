# SPDX-License-Identifier: BSD-3-Clause
# Sourced (bash) by allreduce_compare.sh and alltoall_compare.sh: what the two
# harnesses do alike. The caller defines die() and sets cmp_name (its name,
# for messages) before it sources this file.
#   cmp_bytes SIZE    8, 4K, 64M, 1G -> bytes on stdout; exits 2 on anything else
#   cmp_bed_ranks     on a bed (bed_lib.sh's bed_load done): ranks defaults to
#                     every rank of the bed, and each count must fit it
#   cmp_placement     scbind: the --bind argument of every sc-run launch, from
#                     $bind (--bind core|none; default none on a bed, core on
#                     this host), and a line for the output's header saying
#                     where each library's ranks run (Open MPI's are unbound
#                     on a bed and on this host alike)
#   cmp_cases ALIGN   minb, maxb and budget read as sizes (cmp_bytes), factor,
#                     miniters and rounds checked, minb at least ALIGN; then
#                     sizes[]: minb, minb x factor, ... up to maxb (maxb added
#                     when the steps miss it), each rounded down to a multiple
#                     of ALIGN; cases[]: "size:iters:warmup", iters = budget /
#                     size clamped to miniters..2000, warm-up a tenth of it
#                     (>= minwarm)
#   cmp_have_ours BIN have_ours: 1 when sc-run and BIN are in $build, else 0
#                     and a note
#   cmp_tmp           tmp: a directory removed at exit; note(): a '#' line
#   cmp_python        py: a python3 with torch.distributed, else empty and a note
#   cmp_mpicc OUT SRC [FLAG...]
#                     have_mpi: 1 when mpicc built SRC into OUT, else 0 and a note
#   cmp_rounds        rounds x P in $ranks x LIB in $launchers (not --skip'd):
#                     the caller's run_lib LIB P, which appends "SIZE TIME_US"
#                     or "SIZE fail WHY" lines to $tmp/P.LIB.raw; load_start
#                     and load_end: the load average around them
#   cmp_best          for P in $ranks and LIB in $libs: $tmp/P.LIB, each size's
#                     best time over the rounds, and a note for each failure
#                     with the end of its log ($tmp/P.LIB.log; on a bed the
#                     ours-ALGO rows share $tmp/P.ours.log)
#   cmp_json_runs BUSBW
#                     the JSON's fields from "host" on: the machine, the load,
#                     the placement, the bed, and the "iterations" and
#                     "results"; BUSBW is busbw's factor as an awk expression
#                     of p (the rank count)
cmp_bytes() {
  local v=$1 m=1
  case "$v" in
  *[kK]) m=1024; v=${v%?} ;;
  *[mM]) m=$((1 << 20)); v=${v%?} ;;
  *[gG]) m=$((1 << 30)); v=${v%?} ;;
  esac
  case "$v" in '' | *[!0-9]*) echo "$cmp_name: bad size '$1'" >&2; exit 2 ;; esac
  echo $((v * m))
}

cmp_bed_ranks() {
  local p
  ranks=${ranks:-$((nb_hosts * nb_m))}
  for p in $ranks; do
    [ "$p" -ge 2 ] 2>/dev/null && [ "$p" -le $((nb_hosts * nb_m)) ] ||
      die "-n $p: the bed $bed has $nb_hosts hosts x $nb_m ranks"
  done
}

cmp_placement() {
  [ -n "$bind" ] || { if [ -n "$bed" ]; then bind=none; else bind=core; fi; }
  case "$bind" in core | none) ;; *) die "--bind must be core or none, got '$bind'" ;; esac
  scbind=(--bind "$bind")
  if [ "$bind" = none ]; then
    placement="every library's ranks unbound (sc-run --bind none, mpirun --bind-to none)"
  elif [ -n "$bed" ]; then
    placement="ours, Gloo and the sockets bound round robin to the CPUs (sc-run --bind core), Open MPI unbound"
  else
    placement="ours bound round robin to the CPUs (sc-run --bind core), Open MPI and Gloo unbound"
  fi
}

cmp_cases() {
  local align=$1 s it w
  minb=$(cmp_bytes "$minb") || exit 2
  maxb=$(cmp_bytes "$maxb") || exit 2
  budget=$(cmp_bytes "$budget") || exit 2
  [ "$factor" -ge 2 ] 2>/dev/null || die "-f must be >= 2"
  [ "$miniters" -ge 1 ] 2>/dev/null || die "-i must be >= 1"
  [ "$rounds" -ge 1 ] 2>/dev/null || die "-r must be >= 1"
  [ "$minb" -ge "$align" ] || minb=$align
  sizes=()
  for ((s = minb; s <= maxb; s *= factor)); do sizes+=("$((s / align * align))"); done
  [ "${sizes[-1]}" -lt "$maxb" ] && sizes+=("$((maxb / align * align))")
  cases=()
  for s in "${sizes[@]}"; do
    it=$((budget / s))
    [ "$it" -lt "$miniters" ] && it=$miniters
    [ "$it" -gt 2000 ] && it=2000
    w=$((it / 10))
    [ "$w" -lt "$minwarm" ] && w=$minwarm
    cases+=("$s:$it:$w")
  done
}

cmp_tmp() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
}
note() { echo "# $*"; }

cmp_have_ours() {
  local b
  have_ours=1
  for b in sc-run "$1"; do
    [ -x "$build/$b" ] || { note "ours: $build/$b not found (run from a build directory or set SC_BUILD)"; have_ours=0; }
  done
}

cmp_python() {
  local cand
  py=""
  for cand in ${PYTHON:-} /usr/bin/python3 python3; do
    if "$cand" -c "import torch.distributed" >/dev/null 2>&1; then py=$(command -v "$cand"); break; fi
  done
  [ -n "$py" ] || note "gloo: no python3 with torch (apt-get install -y python3-torch)"
}

cmp_mpicc() {
  local out=$1 src=$2
  shift 2
  have_mpi=0
  if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    if mpicc -O2 "$@" -o "$out" "$src" 2>"$tmp/mpicc.err"; then
      have_mpi=1
    else
      note "mpi: mpicc failed: $(head -c 300 "$tmp/mpicc.err")"
    fi
  else
    note "mpi: mpicc/mpirun not found (apt-get install -y openmpi-bin libopenmpi-dev)"
  fi
}

cmp_loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

cmp_rounds() {
  local r p lib
  load_start=$(cmp_loadavg)
  for r in $(seq "$rounds"); do
    for p in $ranks; do
      for lib in $launchers; do
        case "$skip" in *",$lib,"*) continue ;; esac
        echo "# round $r/$rounds P=$p $lib (load $(cmp_loadavg))" >&2
        run_lib "$lib" "$p"
      done
    done
  done
  load_end=$(cmp_loadavg)
}

cmp_best() {
  local p lib raw lg
  for p in $ranks; do
    for lib in $libs; do
      raw="$tmp/$p.$lib.raw"
      [ -f "$raw" ] || : >"$raw"
      awk '$2 != "fail" { if (!($1 in b) || $2 + 0 < b[$1]) b[$1] = $2 + 0 }
           END { for (s in b) print s, b[s] }' "$raw" >"$tmp/$p.$lib"
      if grep -q " fail" "$raw"; then
        note "P=$p $lib: $(grep ' fail' "$raw" | head -3 | tr '\n' ';')"
        lg="$tmp/$p.$lib.log"
        case "$lib" in ours-*) [ -n "$bed" ] && lg="$tmp/$p.ours.log" ;; esac
        [ -s "$lg" ] && note "  $(grep -v '^$' "$lg" | grep -v '^#' | tail -3 | tr '\n' ' ' | head -c 400)"
      fi
    done
  done
}

cmp_json_runs() {
  local factor_expr=$1 sep="" c s it w p lib t bw
  printf '  "host": "%s", "cpus": %d, "date": "%s", "rounds": %d,\n' "$(hostname)" "$(nproc)" \
    "$(date -u +%FT%TZ)" "$rounds"
  printf '  "loadavg_start": "%s", "loadavg_end": "%s",\n' "$load_start" "$load_end"
  printf '  "bind": "%s",\n' "$bind"
  if [ -n "$bed" ]; then
    printf '  "netbed": {"name": "%s", "hosts": %d, "ranks_per_host": %d, "rate": "%s", "rate_bps": %s},\n' \
      "$bed" "$nb_hosts" "$nb_m" "$nb_rate" "$link_bps"
    printf '  "link_gbs": %s,\n' "$(awk -v b="$link_bps" 'BEGIN {printf "%.6f", b / 8e9}')"
  fi
  printf '  "iterations": ['
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
          bw=$(awk -v s="$s" -v t="$t" -v p="$p" "BEGIN {printf \"%.6f\", s / (t * 1e3) * ($factor_expr)}")
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
}
