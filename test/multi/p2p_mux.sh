#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Point-to-point over SC_TRANSPORT=auto's mux with shared memory and TCP in
# one communicator: 4 ranks, ranks 2 and 3 under another hostname (their own
# UTS namespaces), so that 0-1 and 2-3 are shared-memory pairs and the rest
# TCP. test/multi/mr_p2p.c's exchanges must pass, and sc_sendrecv_perf's
# 8 B ring (two shared-memory and two TCP hops per round, its result
# checked) must run over the mux as over TCP alone; both times are printed
# beside each other (a benchmark's figure, not asserted: perf/README.md has
# the comparison on the emulated cluster).
. "$top_srcdir/test/multi/lib.sh"
unset SC_TRANSPORT SC_RANK SC_WORLD_SIZE SC_ROOT_ADDR RANK WORLD_SIZE MASTER_ADDR MASTER_PORT SLURM_PROCID SLURM_NTASKS OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
if ! unshare -u true 2>/dev/null; then
  echo "SKIP: two hostnames on one machine need unshare -u (root)"
  exit 77
fi
port() { echo $((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000)); }
run4() { # run4 TRANSPORT PROGRAM ARGS...: 4 ranks, 2 and 3 under another hostname
  tp=$1 p=$(port) pids=""
  shift
  for r in 0 1 2 3; do
    if [ "$r" -ge 2 ]; then
      env SC_DEBUG=INFO SC_RANK=$r SC_WORLD_SIZE=4 SC_ROOT_ADDR=127.0.0.1:$p SC_TRANSPORT=$tp \
        timeout 120 unshare -u sh -c 'hostname sc-mux-other && exec "$@"' sh "$@" \
        >"$tmpdir/out$r" 2>"$tmpdir/log$r" &
    else
      env SC_DEBUG=INFO SC_RANK=$r SC_WORLD_SIZE=4 SC_ROOT_ADDR=127.0.0.1:$p SC_TRANSPORT=$tp \
        timeout 120 "$@" >"$tmpdir/out$r" 2>"$tmpdir/log$r" &
    fi
    pids="$pids $!"
  done
  rc=0
  for q in $pids; do wait "$q" || rc=1; done
  return $rc
}
# run4 with a retry where the port was taken; the logs shown on failure.
run4_retry() {
  for try in 1 2 3; do
    run4 "$@" && return 0
    cat "$tmpdir/log0" | grep -q 'Address already in use' || break
  done
  cat "$tmpdir/out0" "$tmpdir/log0" "$tmpdir/log1" "$tmpdir/log2" "$tmpdir/log3" | tail -60
  return 1
}
routes() { # every rank: one peer over shared memory, two over tcp
  run4_retry auto "$MR/mr_p2p" all || return 1
  for r in 0 1 2 3; do
    grep -q "rank $r: 1 peer over shared memory, 2 over tcp" "$tmpdir/log$r" ||
      { echo "rank $r: not 1 shm + 2 tcp peers"; cat "$tmpdir/log$r"; return 1; }
  done
}
check "p2p over the mux (2 hosts x 2 ranks)" routes
ring_us() { # ring_us TRANSPORT: sc_sendrecv_perf's time for 8 B, us
  run4_retry "$1" "$top_builddir/sc_sendrecv_perf" -b 8 -e 8 -n 2000 -w 200 -d uint8 || return 1
  awk '!/^#/ && NF >= 9 {print $6; exit}' "$tmpdir/out0"
}
ring() {
  t_tcp=$(ring_us tcp) || return 1
  t_mux=$(ring_us auto) || return 1
  echo "8 B send/receive ring: tcp $t_tcp us, auto (mux) $t_mux us"
  awk -v a="$t_mux" -v b="$t_tcp" 'BEGIN { exit !(a + 0 > 0 && b + 0 > 0) }'
}
check "p2p ring over the mux and over tcp" ring
finish
