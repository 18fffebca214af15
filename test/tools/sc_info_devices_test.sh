#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc-info's device lines: the device runtime it would use (none, or the
# stand-in with 2 devices), and, when built with CUDA, whether an MPS
# control daemon listens at CUDA_MPS_PIPE_DIRECTORY: a FIFO with a reader
# (a daemon), a FIFO without one (a daemon that quit), a regular file, and
# no directory at all.
. "$top_srcdir/test/multi/lib.sh"
INFO="$top_builddir/sc-info"
standin="$(cd "$top_builddir" && pwd)/test/devfake/.libs/libsc_devfake.so"
has() { # has PATTERN ENV...: sc-info under ENV prints a line matching PATTERN
  pat=$1
  shift
  env "$@" "$INFO" >"$tmpdir/info" 2>&1 || return 1
  grep -q "$pat" "$tmpdir/info" || {
    cat "$tmpdir/info"
    return 1
  }
}
check "no device runtime" has '^device runtime: none (host memory only)$' SC_DEVRT_STANDIN= \
  CUDA_VISIBLE_DEVICES=
if [ -f "$standin" ]; then
  check "the stand-in, 2 devices" has '^device runtime: devfake, 2 devices' \
    SC_DEVRT_STANDIN="$standin" SC_DEVFAKE_DEVICES=2
fi
if "$INFO" | grep -q '^CUDA MPS:'; then
  d="$tmpdir/mps"
  mkdir "$d"
  check "no pipe" has "^CUDA MPS: no control daemon at $d " CUDA_MPS_PIPE_DIRECTORY="$d"
  : >"$d/control"
  check "a regular file" has "^CUDA MPS: no control daemon" CUDA_MPS_PIPE_DIRECTORY="$d"
  rm "$d/control"
  mkfifo "$d/control"
  check "a FIFO nobody reads" has "^CUDA MPS: no control daemon" CUDA_MPS_PIPE_DIRECTORY="$d"
  # A reader holds the FIFO open, as a running daemon does.
  sleep 30 <>"$d/control" &
  reader=$!
  check "a FIFO with a reader" has "^CUDA MPS: a control daemon listens at $d " \
    CUDA_MPS_PIPE_DIRECTORY="$d"
  kill "$reader" 2>/dev/null
  wait "$reader" 2>/dev/null
else
  echo "SKIP: the MPS rows (built without CUDA)"
fi
finish
