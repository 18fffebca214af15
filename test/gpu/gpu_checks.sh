#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The checks that need a GPU, in one bounded run (docs/CUDA.md, "Running on a
# GPU"): the CUDA unit tests, the device test scripts on CUDA instead of the
# stand-in (SC_TEST_DEVICE=cuda), the Python binding with CUDA tensors, and
# the GPU measurements. Every step has its own time limit; a step that runs
# past it is killed and reported, and the rest still run.
#
# Usage: test/gpu/gpu_checks.sh BUILD_DIR LOG_DIR [STEPS]
#   BUILD_DIR  a configured and built tree (--with-cuda), after
#              `make check TESTS=` so that the test programs exist
#   LOG_DIR    one log per step, and summary.txt
#   STEPS      any of "unit kernels perf mps multi" (default: all five;
#              mps needs nvidia-cuda-mps-control; multi includes the Python
#              binding and the torch backend with CUDA tensors)
# SC_GPU_UNIT_S and SC_GPU_MULTI_S bound each unit and multi step (seconds).
# Run from the source tree's root. Prints one line per step.
B=$(cd "$1" && pwd) || exit 2
L=$2
steps=${3:-unit kernels perf mps multi}
mkdir -p "$L" || exit 2
top_builddir=$B
top_srcdir=$(pwd)
export top_builddir top_srcdir
: >"$L/summary.txt"
say() { echo "$*" | tee -a "$L/summary.txt"; }

report() { # report NAME SECONDS RC T0
  last=$(grep -v '^$' "$L/$1.log" | tail -n 1 | cut -c1-150)
  verdict=ok
  [ "$3" -ne 0 ] && verdict="FAILED (exit $3)"
  [ "$3" -eq 77 ] && verdict=skipped
  [ "$3" -eq 124 ] && verdict="TIMED OUT after $2 s"
  say "$1: $verdict, $(($(date +%s) - $4)) s: $last"
}

# step NAME SECONDS CMD...: run CMD with its own limit, log to LOG_DIR/NAME.log
step() {
  name=$1 limit=$2
  shift 2
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$L/$name.log" 2>&1
  report "$name" "$limit" $? "$t0"
}

# thread_stacks PID: the stacks of PID's threads on stdout (cuda-gdb, else
# gdb; nothing where neither is installed).
thread_stacks() {
  dbg=$(command -v cuda-gdb || command -v gdb) || return 0
  timeout 40 "$dbg" -batch -p "$1" -ex "thread apply all bt" 2>&1 | grep -v '^\['
}

# unit_step NAME SECONDS PROGRAM...: as step, with the output line-buffered;
# a program still running at its limit gets the stacks of its threads
# (cuda-gdb or gdb, where one is installed) in its log before it is killed.
unit_step() {
  name=$1 limit=$2
  shift 2
  t0=$(date +%s)
  stdbuf -oL -eL "$@" >"$L/$name.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [ $(($(date +%s) - t0)) -lt "$limit" ]; do sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    thread_stacks "$pid" >>"$L/$name.log"
    kill -9 "$pid"
    wait "$pid"
    rc=124
  else
    wait "$pid"
    rc=$?
  fi
  report "$name" "$limit" "$rc" "$t0"
}

# stacks_before NAME SECONDS PATTERN: in the background, once SECONDS have
# passed (a step's limit less a minute), the stacks of every process whose
# command line matches PATTERN go to LOG_DIR/NAME-stacks.log: a hung test's
# threads, before its step is killed. Stopped by touching LOG_DIR/NAME.over.
stacks_before() {
  (
    i=0
    while [ "$i" -lt "$2" ] && [ ! -f "$L/$1.over" ]; do
      sleep 1
      i=$((i + 1))
    done
    [ -f "$L/$1.over" ] && exit 0
    for p in $(pgrep -f "$3"); do
      echo "== pid $p: $(tr '\0' ' ' </proc/"$p"/cmdline)"
      thread_stacks "$p"
    done >"$L/$1-stacks.log" 2>&1
  ) >/dev/null 2>&1 &
}

say "gpu_checks: $(date -u +%FT%TZ) on $(hostname); $(nvidia-smi -L 2>&1 | head -n 1)"
say "driver: $(nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)"
"$B/sc-info" >"$L/sc-info.log" 2>&1
say "sc-info: $(grep -i -m 2 'cuda\|device' "$L/sc-info.log" | tr '\n' ' ' | cut -c1-200)"

for s in $steps; do
  case $s in
  unit)
    # The kernels against the CPU kernels, the CUDA device runtime, the
    # device kernels through the runtime table, and the device-pointer
    # refusals (which need a GPU to pass a device pointer).
    for t in test_cuda_kernels test_devrt_cuda test_devrt_kernels_cuda test_device_args; do
      unit_step "unit-$t" "${SC_GPU_UNIT_S:-120}" "$B/test/unit/$t" &
    done
    wait
    ;;
  kernels)
    # The kernels alone in one process, nothing else on the GPU: every
    # reduction (dtype and op) against a device-to-device copy of the same
    # bytes, each result checked against the CPU kernels; top-k selection on
    # the GPU against the host, and against torch.topk.
    step "kernels-reduce" 180 "$B/sc_kernel_perf" --mem device -b 16M -e 256M -f 16
    step "kernels-select-device" 60 "$B/sc_gtopk_perf" --select --mem device
    step "kernels-select-host" 60 "$B/sc_gtopk_perf" --select
    step "kernels-torch-topk" 90 python3 perf/compare/torch_gpu_topk.py --build "$B"
    ;;
  perf)
    # Alone on the machine, one after another. Device buffers against host
    # buffers in one sitting: over shm (CUDA IPC, reductions on the GPU) and
    # over tcp (staged through pinned host memory).
    P="$B/sc_allreduce_perf -b 64K -e 256M -f 4 -n 10 -w 3"
    for n in 2 4; do
      step "perf-allreduce-shm-device-n$n" 60 "$B/sc-run" -n "$n" -x SC_TRANSPORT=shm $P --mem device
      step "perf-allreduce-shm-host-n$n" 60 "$B/sc-run" -n "$n" -x SC_TRANSPORT=shm $P
    done
    P="$B/sc_allreduce_perf -b 1M -e 64M -f 4 -n 5 -w 2"
    step "perf-allreduce-tcp-device-n2" 60 "$B/sc-run" -n 2 -x SC_TRANSPORT=tcp $P --mem device
    step "perf-allreduce-tcp-host-n2" 60 "$B/sc-run" -n 2 -x SC_TRANSPORT=tcp $P
    # gTop-k on device buffers.
    step "perf-gtopk-device-n4" 60 "$B/sc-run" -n 4 "$B/sc_gtopk_perf" --mem device
    step "perf-torch-allreduce-n4" 120 python3 perf/compare/torch_gpu_allreduce.py -n 4 \
      --size 64M --rounds 3 --build "$B"
    ;;
  mps)
    # Ranks sharing the GPU run at once only under MPS (docs/CUDA.md), and
    # only then take the all-reduce's kernel path. Under the daemon: every
    # dtype, op, count and in-place form through the kernel path (mr_device
    # checks each result; the log must show every rank chose it), each mode
    # alone over many rounds; then the kernel path against the host path, and
    # torch's gloo and NCCL on CUDA tensors.
    if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
      say "mps: skipped (no nvidia-cuda-mps-control)"
      continue
    fi
    CUDA_MPS_PIPE_DIRECTORY=$L/mps CUDA_MPS_LOG_DIRECTORY=$L/mps
    export CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    mkdir -p "$L/mps"
    if ! nvidia-cuda-mps-control -d; then
      say "mps: skipped (the daemon did not start)"
      continue
    fi
    kernel_path() { # kernel_path N ARGS...: mr_device through the kernel path on every rank
      n=$1
      shift
      SC_DEBUG=INFO SC_TRANSPORT=shm "$B/sc-run" -n "$n" --timeout 240 "$B/test/multi/mr_device" \
        --allreduce-only "$@" >"$L/kp.out" 2>&1
      st=$?
      grep -v " INFO " "$L/kp.out" | tail -n "$n"
      grep -m 1 "device all-reduce:" "$L/kp.out"
      [ "$st" -eq 0 ] && [ "$(grep -c 'device all-reduce: the kernel path' "$L/kp.out")" -eq "$n" ]
    }
    for n in 2 3 4 8; do
      step "mps-kernel-path-n$n" 240 kernel_path "$n"
    done
    SC_DEVICE_ALLREDUCE_HALF_BYTES=65536 SC_DEVICE_ALLREDUCE_ONESHOT_BYTES=0
    export SC_DEVICE_ALLREDUCE_HALF_BYTES SC_DEVICE_ALLREDUCE_ONESHOT_BYTES
    step "mps-kernel-path-twoshot-n5" 240 kernel_path 5
    SC_DEVICE_ALLREDUCE_ONESHOT_BYTES=1073741824
    step "mps-kernel-path-oneshot-n3" 240 kernel_path 3
    unset SC_DEVICE_ALLREDUCE_HALF_BYTES SC_DEVICE_ALLREDUCE_ONESHOT_BYTES
    P="$B/sc_allreduce_perf -b 8 -e 256M -f 4 -n 10 -w 3 --mem device"
    for n in 2 4; do
      step "perf-allreduce-mps-kernel-n$n" 90 "$B/sc-run" -n "$n" -x SC_TRANSPORT=shm $P
      step "perf-allreduce-mps-host-n$n" 90 "$B/sc-run" -n "$n" -x SC_TRANSPORT=shm \
        -x SC_DEVICE_ALLREDUCE=host $P
    done
    step "perf-torch-allreduce-mps-n4" 150 python3 perf/compare/torch_gpu_allreduce.py -n 4 \
      --size 64M --rounds 3 --nccl --build "$B"
    echo quit | nvidia-cuda-mps-control
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    ;;
  multi)
    # The device scripts on CUDA; several at once (they share the GPU).
    SC_TEST_DEVICE=cuda
    export SC_TEST_DEVICE
    m=${SC_GPU_MULTI_S:-900}
    # The transport's IPC path alone on CUDA: every pair at once, a buffer
    # freed and made again, forged records (test/multi/device_ipc.sh runs
    # it on the stand-in).
    for a in "2 data" "4 data" "8 data" "2 mismatch" "2 garbage" "2 badhandle"; do
      # shellcheck disable=SC2086 # "N MODE" splits on purpose
      step "ipc-$(echo $a | tr ' ' -)" 60 "$B/test/multi/shm_ipc_procs" $a
    done
    stacks_before multi-stream $((m - 60)) '[m]r_stream'
    stacks_before multi-device $((m - 60)) '[m]r_device'
    stacks_before multi-dev_sparse $((m - 60)) '[m]r_dev_'
    step "multi-device" "$m" sh test/multi/device.sh &
    s1=$!
    step "multi-dev_sparse" "$m" sh test/multi/dev_sparse.sh &
    s2=$!
    step "multi-stream" "$m" sh test/multi/stream.sh &
    s3=$!
    step "python-cuda_staging" 300 sh test/python/cuda_staging.sh &
    s4=$!
    wait "$s1" "$s2" "$s3" "$s4"
    touch "$L/multi-stream.over" "$L/multi-device.over" "$L/multi-dev_sparse.over"
    unset SC_TEST_DEVICE
    # The torch backend's stream-ordered path alone on the GPU (late
    # producers are timed on it): every collective, Work.wait, DDP and the
    # gTop-k hook with host synchronisations counted; then SPARSECOLL_CUDA_SYNC=1.
    step "python-cuda_stream_order" 300 sh test/python/cuda_stream_order.sh
    ;;
  esac
done
say "gpu_checks: done $(date -u +%FT%TZ)"
