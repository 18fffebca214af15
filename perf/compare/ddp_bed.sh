#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# PyTorch training on an sc-netbed emulated cluster: examples/train_ddp.py's
# model (a small CNN, 1 rank per host) under each way this package offers to
# communicate its gradients, side by side in one run, variants alternating:
#   ddp-gloo      DistributedDataParallel, backend gloo
#   ddp-sc        DistributedDataParallel, backend sparsecoll
#   gtopk-0.01    DDP + sparsecoll.torch.hooks.gtopk_hook, density 0.01
#   gtopk-0.001   the same, density 0.001
#   dopt-mgwfbp   sparsecoll.torch.DistributedOptimizer, policy mgwfbp (dense)
#   dopt-dear     DistributedOptimizer, policy dear (dense)
# Each launch runs STEPS training steps; train_ddp.py reports the median step
# time past its first fifth (the warm-up). ROUNDS repeats the alternation; the
# table gives the median over rounds of those medians, and the smallest and
# largest. A variant that fails shows n/a and its log is named.
#
# Usage (from a build directory, or with SC_BUILD=dir; root, a bed up):
#   ddp_bed.sh [--netbed[=scnb-ID]] [-n RANKS] [-s STEPS] [-r ROUNDS]
#              [--only NAME,...] [-- train_ddp.py options (e.g. --width 32)]
# Defaults: the bed $SC_NETBED or scnb-0, all its ranks, 25 steps, 5 rounds
# (about 5 minutes on 4 hosts of a 2-core machine). Needs python3 with
# torch ($PYTHON, else /usr/bin/python3 or python3 that imports torch).
set -u
bed="${SC_NETBED:-scnb-0}"
ranks=""
steps=25
rounds=5
only=""
usage() { sed -n '2,22p' "$0"; }
die() { echo "ddp_bed.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
  --netbed) shift ;;
  --netbed=*) bed="${1#--netbed=}"; shift ;;
  -n) ranks="$2"; shift 2 ;;
  -s) steps="$2"; shift 2 ;;
  -r) rounds="$2"; shift 2 ;;
  --only) only=",$2,"; shift 2 ;;
  --) shift; break ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown argument '$1' (see --help)" ;;
  esac
done
case "$steps$rounds" in '' | *[!0-9]*) die "-s and -r take positive numbers" ;; esac

build="${SC_BUILD:-.}"
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "$build" 2>/dev/null && pwd)" || die "SC_BUILD '$SC_BUILD' is not a directory"
[ -x "$build/sc-run" ] || die "$build/sc-run not found (run from a build directory)"
[ -f "$build/python/sparsecoll/_consts.py" ] || die "$build/python/sparsecoll not built (make in $build)"
example="$here/../../examples/train_ddp.py"
[ -r "$example" ] || die "$example not found"

py=""
for c in ${PYTHON:-} /usr/bin/python3 python3; do
  if "$c" -c "import torch" >/dev/null 2>&1; then py=$c; break; fi
done
[ -n "$py" ] || die "no python3 that imports torch (apt-get install python3-torch)"

case "$bed" in scnb-*) ;; *) bed="scnb-$bed" ;; esac
case "$bed" in scnb-*[!A-Za-z0-9_-]* | scnb-) die "--netbed=$bed: not a bed name (scnb-ID)" ;; esac
state="${SC_NETBED_STATE_DIR:-/run/sc-netbed}/$bed.env"
[ -r "$state" ] || die "no $state (bring a bed up: sc-netbed --id ${bed#scnb-} up 4 1gbit)"
key() { sed -n "s/^$1=//p" "$state" | head -1; }
nb_hosts=$(key NETBED_HOSTS)
nb_m=$(key NETBED_RANKS_PER_HOST)
nb_rate=$(key NETBED_RATE)
nb_if=$(key NETBED_IFNAME)
[ -n "$nb_hosts" ] && [ -n "$nb_if" ] || die "$state: NETBED_HOSTS or NETBED_IFNAME missing"
ranks=${ranks:-$((nb_hosts * ${nb_m:-1}))}

# name|train_ddp.py arguments
variants=(
  "ddp-gloo|--backend gloo"
  "ddp-sc|--backend sparsecoll"
  "gtopk-0.01|--hook gtopk --density 0.01"
  "gtopk-0.001|--hook gtopk --density 0.001"
  "dopt-mgwfbp|--optimizer mgwfbp"
  "dopt-dear|--optimizer dear"
)

logdir=$(mktemp -d "${TMPDIR:-/tmp}/ddp_bed.XXXXXX")
res="$logdir/results"
: >"$res"
echo "# ddp_bed.sh: $bed ($nb_hosts hosts x ${nb_m:-1} at $nb_rate, interface $nb_if), $ranks ranks," \
  "$steps steps x $rounds rounds, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); logs in $logdir"
for ((r = 1; r <= rounds; r++)); do
  for v in "${variants[@]}"; do
    name=${v%%|*}
    args=${v#*|}
    case "$only" in '' | *",$name,"*) ;; *) continue ;; esac
    log="$logdir/$name.$r.log"
    # Gloo (ddp-gloo) and torch's store must use the bed's interface and
    # host 0's bed address: train_ddp.py takes MASTER_ADDR:PORT from
    # SC_ROOT_ADDR, which sc-run --netbed points at host 0.
    # shellcheck disable=SC2086
    timeout 600 "$build/sc-run" --netbed="$bed" -n "$ranks" --timeout 500 \
      -x GLOO_SOCKET_IFNAME="$nb_if" -x PYTHONPATH="$build/python" \
      -x SPARSECOLL_LIBRARY="$build/.libs/libsparsecoll.so.0" -x OMP_NUM_THREADS=1 \
      -x TORCH_CPP_LOG_LEVEL=ERROR -x PYTHONDONTWRITEBYTECODE=1 \
      "$py" "$example" --steps "$steps" $args "$@" >"$log" 2>&1
    rc=$?
    ms=$(sed -n 's/^median step time \([0-9.]*\) ms.*/\1/p' "$log" | tail -1)
    if [ $rc -ne 0 ] || [ -z "$ms" ]; then
      echo "# $name round $r failed (exit $rc): $log" >&2
      ms=nan
    fi
    echo "$name $r $ms" >>"$res"
    echo "# round $r $name: ${ms} ms"
  done
done

printf "%-12s %10s %10s %10s %8s\n" variant "median ms" "min" "max" "/gloo"
for v in "${variants[@]}"; do
  name=${v%%|*}
  case "$only" in '' | *",$name,"*) ;; *) continue ;; esac
  awk -v n="$name" '$1 == n && $3 != "nan" { print $3 }' "$res" | sort -g >"$logdir/col"
  cnt=$(wc -l <"$logdir/col")
  if [ "$cnt" -eq 0 ]; then
    printf "%-12s %10s\n" "$name" n/a
    continue
  fi
  med=$(awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }' "$logdir/col")
  [ "$name" = ddp-gloo ] && gloo=$med
  printf "%-12s %10.1f %10.1f %10.1f %8s\n" "$name" "$med" "$(head -1 "$logdir/col")" \
    "$(tail -1 "$logdir/col")" "$(awk -v a="$med" -v b="${gloo:-}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
done
