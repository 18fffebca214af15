#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc_comm_init_env with torchrun's, Slurm's and Open MPI's variables (and
# SC_AUTH_TOKEN agreement), three processes started by hand.
. "$top_srcdir/test/multi/lib.sh"
unset SC_RANK SC_WORLD_SIZE SC_ROOT_ADDR RANK WORLD_SIZE MASTER_ADDR MASTER_PORT SLURM_PROCID SLURM_NTASKS OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
port() { echo $((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000)); }
launch3_once() { # launch3_once STYLE PORT: start 3 ranks with that launcher's variables
  p=$2
  pids=""
  for r in 0 1 2; do
    case $1 in
      torchrun) env RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$p timeout 60 "$MR/mr_env" & ;;
      # SC_ROOT_ADDR wins over MASTER_*: 192.0.2.1 (TEST-NET) would never answer.
      torchrun_root) env RANK=$r WORLD_SIZE=3 MASTER_ADDR=192.0.2.1 MASTER_PORT=1 SC_ROOT_ADDR=127.0.0.1:$p timeout 60 "$MR/mr_env" & ;;
      slurm) env SLURM_PROCID=$r SLURM_NTASKS=3 SC_ROOT_ADDR=127.0.0.1:$p timeout 60 "$MR/mr_env" & ;;
      ompi) env OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=3 SC_ROOT_ADDR=localhost:$p SC_AUTH_TOKEN=s3cret timeout 60 "$MR/mr_env" & ;;
    esac
    pids="$pids $!"
  done
  rc=0
  # Rank 0 (the root) failing means the others would only wait for it.
  set -- $pids
  wait "$1" || { rc=1; kill "$2" "$3" 2>/dev/null; }
  wait "$2" || rc=1
  wait "$3" || rc=1
  return $rc
}
# The port is the launcher's choice, as MASTER_PORT is the user's: a random
# one may be taken by a connection of a test running alongside (the kernel
# hands out the same range). Only that failure, said as such, is retried on
# another port; any other failure fails the check.
launch3() { # launch3 STYLE
  for try in 1 2 3; do
    launch3_once "$1" "$(port)" >"$tmpdir/launch" 2>&1 && { cat "$tmpdir/launch"; return 0; }
    cat "$tmpdir/launch"
    grep -q 'Address already in use' "$tmpdir/launch" || return 1
    echo "port taken (try $try), another port"
  done
  return 1
}
check "torchrun variables" launch3 torchrun
check "torchrun variables + SC_ROOT_ADDR" launch3 torchrun_root
check "slurm variables + SC_ROOT_ADDR" launch3 slurm
check "open mpi variables + SC_ROOT_ADDR + token" launch3 ompi
finish
