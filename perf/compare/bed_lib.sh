# SPDX-License-Identifier: BSD-3-Clause
# Sourced (bash) by the comparison scripts that run on an sc-netbed bed:
#   bed_load        reads the bed's layout from the state file `sc-netbed up`
#                   wrote (parsed, not sourced): $bed (scnb-ID or ID) in,
#                   nb_hosts, nb_m (ranks per host), nb_rate, link_bps, nb_if,
#                   nb_addr[] out; dies (the caller's die) on anything missing.
#   bed_mpirun P MCA-ARGS... -- PROGRAM ARGS...
#                   Open MPI on the bed: mpirun inside host 0, one orted per
#                   host started through `sc-netbed rsh` (PMIx reaches each
#                   rank's daemon over loopback), ranks placed consecutively as
#                   sc-run --netbed places them; tcp,self between hosts
#                   (tcp,vader,self with several ranks per host) on the bed's
#                   interface, mpi_yield_when_idle 1 (busy-polling ranks starve
#                   the bed's network stack on few cores); 1200 s at most. Its
#                   output is the program's.
bed_load() {
  case "$bed" in scnb-*) ;; *) bed="scnb-$bed" ;; esac
  case "$bed" in scnb-*[!A-Za-z0-9_-]* | scnb-) die "--netbed=$bed: not a bed name (scnb-ID)" ;; esac
  local state="${SC_NETBED_STATE_DIR:-/run/sc-netbed}/$bed.env" h a
  [ -r "$state" ] || die "--netbed: no $state (bring the bed up: sc-netbed --id ${bed#scnb-} up N RATE)"
  bed_key() { sed -n "s/^$1=//p" "$state" | head -1; }
  nb_hosts=$(bed_key NETBED_HOSTS)
  nb_m=$(bed_key NETBED_RANKS_PER_HOST)
  nb_rate=$(bed_key NETBED_RATE)
  link_bps=$(bed_key NETBED_RATE_BPS)
  nb_if=$(bed_key NETBED_IFNAME)
  case "$nb_hosts$nb_m$link_bps" in
  '' | *[!0-9]*) die "$state: NETBED_HOSTS, NETBED_RANKS_PER_HOST or NETBED_RATE_BPS missing" ;;
  esac
  nb_addr=()
  for ((h = 0; h < nb_hosts; h++)); do
    a=$(bed_key "NETBED_ADDR_$h")
    [ -n "$a" ] || die "$state: no NETBED_ADDR_$h"
    nb_addr+=("$a")
  done
  [ -x "$build/sc-netbed" ] || die "$build/sc-netbed not found (run from a build directory)"
}

bed_mpirun() {
  local p=$1 nh hosts="" h btl=tcp,self mca=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do mca+=("$1"); shift; done
  shift
  nh=$(((p + nb_m - 1) / nb_m))
  for ((h = 0; h < nh; h++)); do hosts="$hosts${hosts:+,}${nb_addr[$h]}:$nb_m"; done
  [ "$nb_m" -gt 1 ] && btl=tcp,vader,self
  timeout 1200 "$build/sc-netbed" --id "${bed#scnb-}" exec 0 mpirun --allow-run-as-root \
    --bind-to none --map-by slot -np "$p" --host "$hosts" \
    --mca plm_rsh_agent "$build/sc-netbed --id ${bed#scnb-} rsh" \
    --mca pml ob1 --mca btl "$btl" --mca btl_tcp_if_include "$nb_if" \
    --mca oob_tcp_if_include "$nb_if" --mca mpi_yield_when_idle 1 "${mca[@]}" "$@" </dev/null
}
