#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Reproduces the figures of docs/REPRODUCTION.md on an emulated cluster
# (sc-netbed): (a) gTop-k vs top-k all-gather vs dense ring, time against P
# with the alpha-beta model; (b)-(d) the dense fusion policies (WFBP, MG-WFBP,
# single bucket, DeAR, P3) on ResNet-50, VGG-16 and BERT-base, and on
# ResNet-50 with every tensor scaled by 0.1 (the bandwidth share of a 10x
# faster link); (e) the sparse schemes (LAGS, OMGS, single gTop-k) on
# ResNet-50 and BERT-base; (f) S-SGD against PowerSGD, ACP-SGD, top-k, fp16
# and auto on ResNet-50 and BERT-base, and a small CNN's convergence under
# dense, PowerSGD and ACP-SGD.
#
# Usage (from a build directory, or with SC_BUILD=dir; needs root):
#   repro.sh [-o DIR] [-r REPS] [--first-rep N] [-P "2 3 4 6 8"] [--wide "12 16"] [--rate 1gbit]
#            [--credit US]
#            [--only a,wide,local,fusion,scaled,bert,sparse,acpsgd,convergence]
#            [--plot-only] [--dpi 80]
#   repro.sh --only onebit,mstopk,kfac    (parts outside the default set)
# Parts: a = the sparse sweep over -P, REPS times (rank counts alternating;
# files gtopk_P<P>_r<N>.json, N from --first-rep, so more runs can be added);
# wide = the same once at the --wide rank counts (past the 2-core CPU limit);
# local = gTop-k and all-gather at -P on one host (shm, no bed): the local work;
# fusion = ResNet-50 and VGG-16, every dense policy; scaled = ResNet-50 at
# --scale 0.1; bert = BERT-base, every dense policy; sparse = part (e), with
# the compute times of its table (-T 90 and -T 200); acpsgd = part (f) on 4
# and 8 hosts (files acp_<trace>_<N>h.json); convergence = part (f)'s
# training runs on 4 ranks over shared memory (torch; learning rates 0.05
# and 0.02). --credit: sc-netbed's
# (default: the bed's own).
# onebit = sc_onebit_perf at -P (1-bit vs dense ring vs all-gather of signs,
# 64 MiB); mstopk = sc_gtopk_perf --select (exact, Gaussian, MSTopK) and
# single gTop-k over ResNet-50 with SC_GTOPK_ALGO = gtopk, hier, hitopk on 4
# hosts x 2 ranks; kfac = sc_kfac_perf (ResNet-50's factors of conv1 and stages 1-2)
# on 4 and 8 hosts.
# Writes DIR/*.json (one per run), DIR/repro.log (the tools' output), DIR/load.tsv (load average before and
# after, the machine's busy share during, seconds and exit status of every
# run), DIR/fig/*.png, DIR/plot.txt (what plot.py printed: measured/model per
# point). Defaults: DIR=repro-out, 3 repetitions, P = 2 3 4 6 8 and wide 12 16
# on a 16-host 1 Gbit/s bed (fusion runs use hosts 0-3). About 30 minutes on
# this 2-core VM. The bed is always taken down on exit.
set -u
out=repro-out reps=3 first=1 ps="2 3 4 6 8" wide="12 16" rate=1gbit credit="" plot_only=0 dpi=80
only="a,wide,local,fusion,scaled,bert,sparse,acpsgd,convergence"
die() { echo "repro.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
  -o) out="$2"; shift 2 ;;
  -r) reps="$2"; shift 2 ;;
  --first-rep) first="$2"; shift 2 ;;
  -P) ps="$2"; shift 2 ;;
  --wide) wide="$2"; shift 2 ;;
  --rate) rate="$2"; shift 2 ;;
  --credit) credit="$2"; shift 2 ;;
  --only) only="$2"; shift 2 ;;
  --plot-only) plot_only=1; shift ;;
  --dpi) dpi="$2"; shift 2 ;;
  -h | --help) sed -n '2,39p' "$0"; exit 0 ;;
  *) die "unknown option '$1'" ;;
  esac
done
src="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${SC_BUILD:-.}" && pwd)"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
plot() { "$py" "$src/perf/plot.py" --dpi "$dpi" "$@"; }
want() { case ",$only," in *",$1,"*) return 0 ;; esac; return 1; }
mkdir -p "$out/fig" || die "cannot create $out"

hosts=1
wide_run=$wide
want wide || wide_run=""
for p in $ps $wide_run; do [ "$p" -gt "$hosts" ] && hosts=$p; done
[ "$hosts" -ge 4 ] || hosts=4
if want kfac && [ "$hosts" -lt 8 ]; then hosts=8; fi
id=repro bed=scnb-repro

busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }
load() { cut -d' ' -f1 /proc/loadavg; }
# run NAME CMD...: runs CMD, logs load average before/after, the machine's busy
# share during the run and the seconds it took to DIR/load.tsv.
run() {
  local name=$1 b0 t0 b1 t1 l0 s0 rc
  shift
  l0=$(load)
  read -r b0 t0 < <(busy)
  s0=$(date +%s)
  echo "== $name (load $l0): $*" | tee -a "$out/repro.log"
  # The tools' text output has what their JSON lacks (fusion replay's sample
  # ranges), so it is kept.
  timeout 900 "$@" 2>&1 | tee -a "$out/repro.log"
  rc=${PIPESTATUS[0]}
  read -r b1 t1 < <(busy)
  printf '%s\t%s\t%s\t%.2f\t%d\t%d\n' "$name" "$l0" "$(load)" \
    "$(echo "$b0 $t0 $b1 $t1" | awk '{d = $4 - $2; print (d > 0 ? ($3 - $1) / d : 0)}')" \
    $(($(date +%s) - s0)) "$rc" >>"$out/load.tsv"
  [ "$rc" -eq 0 ] || echo "repro.sh: $name failed (rc $rc)" >&2
  return 0
}

if [ "$plot_only" -eq 0 ]; then
  for b in sc-netbed sc-run sc_gtopk_perf sc_fusion_replay; do
    [ -x "$build/$b" ] || die "$build/$b not found (run from a build directory)"
  done
  [ "$(id -u)" -eq 0 ] || die "the bed needs root"
  trap '"$build/sc-netbed" --id $id down >/dev/null 2>&1' EXIT
  trap 'exit 130' INT TERM
  "$build/sc-netbed" --id $id up "$hosts" "$rate" ${credit:+--credit "$credit"} >/dev/null ||
    die "sc-netbed up failed"
  [ -s "$out/load.tsv" ] || printf 'run\tload_before\tload_after\tbusy_share\tseconds\trc\n' >"$out/load.tsv"
  echo "# $(date -u '+%F %T') $(nproc) cores, bed $hosts x $rate, $(uptime)" >>"$out/load.tsv"
  R="$build/sc-run --netbed=$bed"

  # (a) one rank per host; dense forced to ring (the model's algorithm), the
  # rank counts alternate within each repetition so load drift hits all.
  gtopk() {
    run "gtopk_P${1}_r$2" $R -n "$1" -x SC_ALGO=ring "$build/sc_gtopk_perf" -w 1 -i 5 \
      -J "$out/gtopk_P${1}_r$2.json"
  }
  if want a; then
    for rep in $(seq "$first" $((first + reps - 1))); do
      for p in $ps; do gtopk "$p" "$rep"; done
    done
  fi
  for p in $wide_run; do gtopk "$p" 1; done
  # The same on one host over shared memory, no bed: the wire is nearly free,
  # so this is the local work (merges, copies, wake-ups on 2 cores) that the
  # alpha-beta model leaves out.
  if want local; then
    for p in $ps; do
      run "local_P$p" "$build/sc-run" -n "$p" -x SC_ALGO=ring "$build/sc_gtopk_perf" -a gtopk \
        -w 1 -i 5 -J "$out/local_P$p.json"
      run "local_ag_P$p" "$build/sc-run" -n "$p" "$build/sc_gtopk_perf" -a allgather \
        -w 1 -i 5 -J "$out/local_ag_P$p.json"
    done
  fi
  # (b)-(d): every dense policy in one interleaved run per model (4 hosts).
  F="$R -n 4 $build/sc_fusion_replay --contiguous --interleave -w 1"
  if want fusion; then
    run r50_dense $F -t resnet50 -T 1500 -i 5 -p wfbp,mgwfbp,single,dear,p3 \
      -J "$out/r50_dense.json"
    run vgg16_dense $F -t vgg16 -T 6000 -i 3 -p wfbp,mgwfbp,single,dear,p3 \
      -J "$out/vgg16_dense.json"
  fi
  # Tensors x 0.1 at 1 Gbit/s: each all-reduce's bytes cost what they would
  # at 10 Gbit/s (the MG-WFBP and DeAR papers' Ethernet) while its startup
  # stays, the regime where merging pays; compute scaled alike.
  if want scaled; then
    run r50_scaled $F -t resnet50 --scale 0.1 -T 150 -i 9 -p wfbp,mgwfbp,single,dear,p3 \
      -J "$out/r50_scaled.json"
  fi
  if want bert; then
    run bert_dense $F -t bert_base -T 6000 -i 2 -p wfbp,mgwfbp,single,dear,p3 \
      -J "$out/bert_dense.json"
  fi
  # (e) the sparse schemes, density 0.001.
  if want sparse; then
    run r50_sparse $F --density 0.001 -t resnet50 -T 90 -i 41 -p lags,omgs,gtopk \
      -J "$out/r50_sparse.json"
    run bert_sparse $F --density 0.001 -t bert_base -T 200 -i 31 -p lags,omgs,gtopk \
      -J "$out/bert_sparse.json"
  fi
  # (f) the dense baseline (P3, the fastest dense policy of (b)-(d)) and the
  # compressed modes, each entry POLICY+MODE, paired round by round in one
  # run per trace and host count; topk and auto at density 0.001, the
  # low-rank modes at rank 4. -T: a GPU's compute for the trace, so that the
  # dense iteration is communication-bound, as in the paper. The -seq entry
  # runs the PowerSGD buckets one at a time (SC_FUSION_PIPELINE=0) beside the
  # overlapped default; on BERT-base in a run of their own, as every entry
  # with error feedback holds a copy of the 438 MB gradient per rank (four
  # such entries are what 8 ranks fit in 23 GB).
  if want acpsgd; then
    for n in 4 8; do
      A="$R -n $n $build/sc_fusion_replay --contiguous --interleave -w 1 --density 0.001"
      M="p3+none,mgwfbp+powersgd,mgwfbp+acpsgd,mgwfbp+topk,mgwfbp+fp16,mgwfbp+auto"
      run "acp_r50_${n}h" $A -p "$M,mgwfbp+powersgd-seq" -t resnet50 -T 200 -i 7 \
        -J "$out/acp_r50_${n}h.json"
      run "acp_bert_${n}h" $A -p "$M" -t bert_base -T 400 -i 5 -J "$out/acp_bert_${n}h.json"
      run "acp_bert_${n}h_seq" $A -p mgwfbp+powersgd,mgwfbp+powersgd-seq,mgwfbp+acpsgd \
        -t bert_base -T 400 -i 3 -J "$out/acp_bert_${n}h_seq.json"
    done
  fi
  # The training run needs no bed: 4 ranks over shared memory, the package
  # and library of this build.
  if want convergence; then
    run convergence env PYTHONPATH="$build/python" SPARSECOLL_LIBRARY="$build/.libs/libsparsecoll.so.0" \
      OMP_NUM_THREADS=1 "$build/sc-run" -n 4 --timeout 800 "$py" "$src/perf/repro/convergence.py" \
      --steps 500 -o "$out/convergence.json"
    # ACP-SGD's learning rate (docs/ALGORITHMS.md, low-rank compression):
    # every method at 0.02, three times the steps.
    run convergence_lr002 env PYTHONPATH="$build/python" \
      SPARSECOLL_LIBRARY="$build/.libs/libsparsecoll.so.0" OMP_NUM_THREADS=1 "$build/sc-run" -n 4 \
      --timeout 880 "$py" "$src/perf/repro/convergence.py" --steps 1500 --lr 0.02 \
      -o "$out/convergence_lr002.json"
  fi
  # 1-bit, MSTopK / HiTopKComm, K-FAC (docs/REPRODUCTION.md, their sections).
  if want onebit; then
    for p in $ps; do
      run "onebit_P$p" $R -n "$p" -x SC_ALGO=ring "$build/sc_onebit_perf" -w 1 -i 3 \
        -J "$out/onebit_P$p.json"
    done
  fi
  if want mstopk; then
    for d in normal laplace; do
      run "select_$d" "$build/sc_gtopk_perf" --select --dist "$d" --iters 10 -J "$out/select_$d.json"
    done
    for a in gtopk hier hitopk; do
      run "hitopk_$a" $R --ranks-per-host 2 -n 8 -x SC_GTOPK_ALGO=$a "$build/sc_fusion_replay" \
        --contiguous -t resnet50 --density 0.001 -p gtopk -T 10 -w 1 -i 5 -J "$out/hitopk_$a.json"
    done
  fi
  if want kfac; then
    for p in 4 8; do
      run "kfac_P$p" $R -n "$p" "$build/sc_kfac_perf" --stages 2 -w 1 -i 3 -J "$out/kfac_P$p.json"
    done
  fi
  "$build/sc-netbed" --id $id down >/dev/null
fi

# The sweep over -P, and (time_vs_nranks_wide.png) the same with the --wide
# rank counts, whose larger times would flatten the first figure.
sweep() { for p in $ps; do ls "$out"/gtopk_P"${p}"_r*.json 2>/dev/null; done; }
{
  files=$(sweep)
  [ -n "$files" ] &&
    plot -o "$out/fig" --link "$rate" --duplex full --local-work \
      --title "gTop-k vs top-k all-gather vs dense ring, $rate links, median of runs" $files
  more=$(for p in $wide; do ls "$out"/gtopk_P"${p}"_r*.json 2>/dev/null; done)
  if [ -n "$files" ] && [ -n "$more" ]; then
    plot -o "$out/fig-wide" --link "$rate" --duplex full \
      --title "the same with P = ${wide// /, } (past the 2-core CPU limit)" $files $more &&
      cp "$out/fig-wide/time_vs_nranks.png" "$out/fig/time_vs_nranks_wide.png"
  fi
  for f in r50_dense vgg16_dense r50_scaled bert_dense r50_sparse bert_sparse; do
    [ -s "$out/$f.json" ] && plot -o "$out/fig" "$out/$f.json"
  done
  acp=$(for f in r50_4h bert_4h r50_8h bert_8h bert_4h_seq bert_8h_seq; do
    [ -s "$out/acp_$f.json" ] && echo "$out/acp_$f.json"
  done)
  [ -n "$acp" ] && "$py" "$src/perf/repro/acpsgd.py" --dpi "$dpi" -o "$out/fig/acpsgd.png" $acp
  [ -s "$out/convergence.json" ] && "$py" "$src/perf/repro/convergence.py" --dpi "$dpi" \
    --plot "$out/convergence.json" -o "$out/fig/convergence.png"
  [ -s "$out/convergence_lr002.json" ] && "$py" "$src/perf/repro/convergence.py" --dpi "$dpi" \
    --plot "$out/convergence_lr002.json" -o "$out/fig/convergence_lr002.png"
  # 1-bit, MSTopK, K-FAC: draws what it finds of onebit_P*, select_*, hitopk_*, kfac_P*.
  "$py" "$src/perf/plot_compress.py" --dpi "$dpi" -o "$out/fig" "$out"
} | tee "$out/plot.txt"
