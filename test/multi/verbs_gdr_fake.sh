#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# GPUDirect RDMA in the verbs transport on a machine without RDMA or GPU: the
# device collectives (mr_device, every result checked against host
# references) with SC_TRANSPORT=verbs over the stand-in libibverbs
# (test/multi/verbs_fake_ibverbs.c) and the device stand-in (test/devfake/).
# The stand-in libibverbs registers stand-in device memory by dma-buf (the
# stand-in's memfd) or as peer memory (its host view) and writes where the
# bytes really are, so a device pointer the transport mishandles faults or
# lands in the wrong place. Each row also checks, from the log, the mode each
# rank chose and how many peers moved device memory directly. It checks the
# transport's registration, pairing and fallbacks, not a GPU's or an HCA's.
. "$top_srcdir/test/multi/lib.sh"
lib="$top_builddir/test/multi/.libs/libverbs_fake_ibverbs.so"
standin="$(cd "$top_builddir" && pwd)/test/devfake/.libs/libsc_devfake.so"
for f in "$lib" "$standin"; do
  if [ ! -f "$f" ]; then
    echo "skipped: $f not built"
    exit 77
  fi
done
mkdir "$tmpdir/fakeib"
ln -s "$(cd "$(dirname "$lib")" && pwd)/libverbs_fake_ibverbs.so" "$tmpdir/fakeib/libibverbs.so.1"
LD_LIBRARY_PATH="$tmpdir/fakeib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SC_TRANSPORT=verbs
SC_DEVRT_STANDIN="$standin"
export LD_LIBRARY_PATH SC_TRANSPORT SC_DEVRT_STANDIN
unset SC_IB_GDR SC_ALGO SC_BCAST_ALGO SC_STAGE_CHUNK_BYTES SC_STAGE_SLOTS FAKEIBV_DMABUF FAKEIBV_PEERMEM

# gdr N "MODE:DIRECT ..." "VAR=VALUE ..." ARGS...: mr_device on N ranks passes on
# every rank, and rank r logs "device buffers: MODE" and "DIRECT of N-1 peers
# direct" for the r-th MODE:DIRECT pair (the last pair serves the other ranks;
# "staging" stands for "staging through pinned host memory").
staging="staging through pinned host memory"
gdr() {
  n=$1 want=$2 vars=$3
  shift 3
  # shellcheck disable=SC2086 # the settings split into words on purpose
  env $vars SC_DEBUG=INFO SC_DEBUG_SUBSYS=NET,COLL "$SC_RUN" -n "$n" --timeout 300 --label \
    "$MR/mr_device" "$@" >"$tmpdir/gdr" 2>&1
  rc=$?
  cat "$tmpdir/gdr"
  [ $rc -eq 0 ] || return 1
  [ "$(grep -c "rank [0-9]* of $n: [0-9]* checks, 0 failures" "$tmpdir/gdr")" -eq "$n" ] || return 1
  r=0
  for w in $want; do last=$w; done
  while [ $r -lt "$n" ]; do
    w=$(echo "$want" | cut -d' ' -f$((r + 1)))
    [ -n "$w" ] || w=$last
    mode=${w%:*} direct=${w#*:}
    [ "$mode" = staging ] && mode=$staging
    grep -q "^\[$r\] .*verbs: device buffers: $mode\$" "$tmpdir/gdr" || {
      echo "rank $r: not \"device buffers: $mode\""
      return 1
    }
    grep -q "^\[$r\] .*device path on devfake device [0-9]*: $direct of $((n - 1)) peers direct" \
      "$tmpdir/gdr" || {
      echo "rank $r: not $direct of $((n - 1)) peers direct"
      return 1
    }
    r=$((r + 1))
  done
}
check "auto, both ways work: dma-buf, every collective n=3" \
  gdr 3 "dma-buf:2" ""
# FAKEIBV_PEERMEM=0 where dma-buf is asked for: only a real dma-buf
# registration reaches the bytes then, not ibv_reg_mr on the device pointer.
check "SC_IB_GDR=dmabuf n=4, 3 QPs per peer (striped device writes)" \
  gdr 4 "dma-buf:3" "SC_IB_GDR=dmabuf SC_IB_QPS_PER_PEER=3 FAKEIBV_PEERMEM=0" --quick
check "SC_IB_GDR=dmabuf n=3, SC_IB_REG_CACHE_BYTES=0 (a dma-buf per message)" \
  gdr 3 "dma-buf:2" "SC_IB_GDR=dmabuf SC_IB_REG_CACHE_BYTES=0 FAKEIBV_PEERMEM=0" --quick
check "SC_IB_GDR=peermem n=3" \
  gdr 3 "peer-memory:2" "SC_IB_GDR=peermem FAKEIBV_DMABUF=0" --quick
check "auto without dma-buf in the provider: peer memory n=3" \
  gdr 3 "peer-memory:2" "FAKEIBV_DMABUF=0" --quick
check "auto with neither: staging n=3" \
  gdr 3 "staging:0" "FAKEIBV_DMABUF=0 FAKEIBV_PEERMEM=0" --quick
check "SC_IB_GDR=staging n=3" \
  gdr 3 "staging:0" "SC_IB_GDR=staging" --quick
check "SC_IB_GDR=dmabuf where it fails: staging n=2" \
  gdr 2 "staging:0" "SC_IB_GDR=dmabuf FAKEIBV_DMABUF=0" --quick
for algo in ring tree rd rabenseifner; do
  check "SC_ALGO=$algo, dma-buf n=5" \
    gdr 5 "dma-buf:4" "SC_ALGO=$algo" --allreduce-only --quick
done
# Rank 0 stages, the others register: only the pairs without rank 0 go direct,
# and both ends of every pair agree (props from both blobs).
mixed() {
  env SC_DEBUG=INFO SC_DEBUG_SUBSYS=NET,COLL "$SC_RUN" -n 3 --timeout 300 --label sh -c \
    '[ "$SC_RANK" = 0 ] && export SC_IB_GDR=staging; exec "$0" "$@"' "$MR/mr_device" \
    >"$tmpdir/mix" 2>&1
  rc=$?
  cat "$tmpdir/mix"
  [ $rc -eq 0 ] && [ "$(grep -c 'checks, 0 failures' "$tmpdir/mix")" -eq 3 ] &&
    grep -q "^\[0\] .*device buffers: $staging\$" "$tmpdir/mix" &&
    grep -q '^\[0\] .*: 0 of 2 peers direct' "$tmpdir/mix" &&
    grep -q '^\[1\] .*: 1 of 2 peers direct' "$tmpdir/mix" &&
    grep -q '^\[2\] .*: 1 of 2 peers direct' "$tmpdir/mix" &&
    [ "$(grep -c 'INFO.*no GPUDirect RDMA' "$tmpdir/mix")" -eq 1 ]
}
check "rank 0 stages, ranks 1-2 dma-buf: every collective n=3" mixed
info() { # info "VAR=VALUE ..." MODE
  # shellcheck disable=SC2086
  env $1 "$top_builddir/sc-info" >"$tmpdir/info" 2>&1
  cat "$tmpdir/info"
  grep -q "^  fake0 GPUDirect RDMA: $2" "$tmpdir/info"
}
check "sc-info: dma-buf" info "" "dma-buf\$"
check "sc-info: peer memory without dma-buf" info "FAKEIBV_DMABUF=0" "peer-memory\$"
check "sc-info: staging without either, with why" info "FAKEIBV_DMABUF=0 FAKEIBV_PEERMEM=0" \
  "$staging (dma-buf: .*peer-memory: .*)"
check "sc-info: no device runtime" info "SC_DEVRT_STANDIN=" "none (host memory only)"
survivors() { # a rank killed mid-job: the others fail with its name, none hangs
  SC_IB_GDR=dmabuf SC_TIMEOUT_MS=60000 "$SC_RUN" -n 3 --grace 90 --timeout 120 --label \
    "$MR/mr_device" --peer-death >"$tmpdir/pd" 2>&1
  cat "$tmpdir/pd"
  [ "$(grep -c 'failed in' "$tmpdir/pd")" -eq 2 ] && [ "$(grep -c 'FAIL' "$tmpdir/pd")" -eq 0 ]
}
check "dma-buf, peer killed mid-job n=3" survivors
finish
