#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# SC_TRANSPORT=auto's verdict as the ranks log it (SC_DEBUG=INFO), checked
# against what this machine offers: without UCX or without an RDMA device
# listed in /sys/class/infiniband, auto must keep shm/tcp, on one host and
# across "hosts" (a rank in its own UTS namespace with another hostname);
# an explicit SC_TRANSPORT makes no auto verdict at all. Where RDMA is
# listed the verdict depends on the fabric: skipped (77), said so.
. "$top_srcdir/test/multi/lib.sh"
unset SC_TRANSPORT SC_RANK SC_WORLD_SIZE SC_ROOT_ADDR RANK WORLD_SIZE MASTER_ADDR MASTER_PORT SLURM_PROCID SLURM_NTASKS OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
if [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ] && "$top_builddir/sc-info" 2>/dev/null | grep -q '^ucx:'; then
  echo "SKIP: RDMA devices listed here and UCX built: auto may rightly choose ucx"
  exit 77
fi
port() { echo $((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000)); }
run3() { # run3 PORT OTHERHOST TRANSPORT: 3 ranks; rank 1 renamed when OTHERHOST is set
  pids=""
  for r in 0 1 2; do
    if [ "$r" = 1 ] && [ -n "$2" ]; then
      env SC_DEBUG=INFO SC_RANK=$r SC_WORLD_SIZE=3 SC_ROOT_ADDR=127.0.0.1:$1 ${3:+SC_TRANSPORT=$3} \
        timeout 60 unshare -u sh -c "hostname '$2' && exec '$MR/mr_env'" 2>"$tmpdir/log$r" &
    else
      env SC_DEBUG=INFO SC_RANK=$r SC_WORLD_SIZE=3 SC_ROOT_ADDR=127.0.0.1:$1 ${3:+SC_TRANSPORT=$3} \
        timeout 60 "$MR/mr_env" 2>"$tmpdir/log$r" &
    fi
    pids="$pids $!"
  done
  rc=0
  for p in $pids; do wait "$p" || rc=1; done
  cat "$tmpdir/log0" "$tmpdir/log1" "$tmpdir/log2"
  return $rc
}
expect() { # expect OTHERHOST TRANSPORT VERDICT READY: VERDICT ("" = none) and READY on every rank
  for try in 1 2 3; do
    run3 "$(port)" "$1" "$2" >"$tmpdir/all" 2>&1 && break
    grep -q 'Address already in use' "$tmpdir/all" || { cat "$tmpdir/all"; return 1; }
  done
  for r in 0 1 2; do
    if [ -n "$3" ]; then
      grep -q "SC_TRANSPORT=auto chose $3" "$tmpdir/log$r" || { echo "rank $r: no '$3' verdict"; cat "$tmpdir/all"; return 1; }
    elif grep -q "SC_TRANSPORT=auto chose" "$tmpdir/log$r"; then
      echo "rank $r: an auto verdict under an explicit SC_TRANSPORT"; cat "$tmpdir/all"; return 1
    fi
    grep -q "ready (transport $4," "$tmpdir/log$r" || { echo "rank $r: not ready on $4"; cat "$tmpdir/all"; return 1; }
  done
}
check "auto, one host: shm/tcp" expect "" "" "tcp/shm (every rank on one host)" auto
if unshare -u true 2>/dev/null; then
  check "auto, two hostnames: tcp" expect "sc-auto-other" "" "tcp/shm (not every rank has RDMA through UCX)" auto
else
  echo "SKIP: auto across hostnames (unshare -u needs root)"
fi
check "explicit tcp: no auto verdict" expect "" tcp "" tcp
finish
