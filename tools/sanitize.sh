#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Sanitizer and valgrind runs:
#   asan     build-asan: ASan + UBSan (any UB is fatal), the whole `make check`
#            (or ASAN_TESTS).
#   tsan     build-tsan: TSan (clang): collectives over TCP and shm, peer
#            death, a 500-op soak, fusion (TSAN_TESTS=all: every multi-rank script
#            over both transports).
#   valgrind build-asan/memcheck (plain -O2 -g, static): memcheck with
#            --leak-check=full, definite and indirect leaks are errors, on a
#            2-rank sc_allreduce_perf 8 B..1 MiB and a 4-rank 300-op soak.
# Usage: sh tools/sanitize.sh [asan] [tsan] [valgrind]   (default: all three)
# SAN_CC picks the ASan compiler (default gcc; clang works too); SAN_SUFFIX
# names other build directories (build-asan$SAN_SUFFIX, build-tsan$SAN_SUFFIX).
# ASAN_TESTS limits the asan step to some tests (TESTS= of make check, or
# "multi": every multi-rank script, the algorithm sweep over shm only;
# default all of make check); SC_CHECK_JOBS how many of them at once
# (default the cores + 1). Exit status:
# 0 when every selected step passed.
# All three configure --without-cuda: the sanitizers cannot see into the CUDA
# runtime (test_cuda_host still runs the kernels' host-device code here).
set -u
cd "$(dirname "$0")/.."
top=$(pwd)
steps=${*:-asan tsan valgrind}
abd=build-asan${SAN_SUFFIX:-}
tbd=build-tsan${SAN_SUFFIX:-}
status=0
summary=""
# ASan's tests run nproc + 1 at once, as in tools/test.sh (SC_CHECK_JOBS):
# many multi-rank tests mostly wait, on peers, deadlines and the launcher.
# TSan's stay at two: its few long scripts are 5-15x slower and hold
# deadlines (peer death, the soak).
jobs=${SC_CHECK_JOBS:-$(($(nproc) + 1))}
note() {
  summary="$summary$1
"
  echo "sanitize.sh: $1"
}
[ -x configure ] || autoreconf -fi >/dev/null

configure_in() { # DIR CONFIGURE-ARGS...: configure once (a Makefile means it was)
  d=$1
  shift
  mkdir -p "$d"
  [ -f "$d/Makefile" ] && return 0
  (cd "$d" && "$top/configure" "$@" >configure.out 2>&1) ||
    { tail -n 30 "$d/configure.out"; return 1; }
}

asan_flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
list_tests() { # DIR: the TESTS of DIR's Makefile, one per line
  printf 'sc-print-tests:\n\t@echo $(TESTS)\n' |
    make -s -C "$1" -f Makefile -f - sc-print-tests 2>/dev/null | tr ' ' '\n'
}

for step in $steps; do
  case $step in
  asan)
    # No -Werror: at -O1 with sanitizers gcc warns about code it cannot see
    # through (maybe-uninitialized); the CI build enforces warnings.
    if [ -n "${ASAN_DIST_FROM:-}" ]; then
      # The release tarball under ASan: make distcheck from that configured
      # tree builds the tarball, unpacks it, configures it out of tree with
      # the sanitizer flags and runs the tests there, then checks install,
      # uninstall and distclean. One build serves both checks.
      from=$ASAN_DIST_FROM
      flags="--without-cuda CC=${SAN_CC:-gcc} CFLAGS='-O1 -g $asan_flags' LDFLAGS='$asan_flags'"
    elif ! configure_in $abd --without-cuda CC="${SAN_CC:-gcc}" CFLAGS="-O1 -g $asan_flags" \
      LDFLAGS="$asan_flags"; then
      note "asan: configure failed"
      status=1
      continue
    else
      from=$abd
    fi
    export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    tests=${ASAN_TESTS:-}
    if [ "$tests" = multi ] || [ "$tests" = unit+multi ]; then
      case $tests in unit+*) units=$(list_tests "$from" | grep -E '^test/unit/') ;; *) units= ;; esac
      # Every multi-rank script (collectives, peer death, failures, soak) as
      # the Makefile lists them, so that new ones join without an edit here;
      # the forced-algorithm sweep, the all-to-alls' and point-to-point's
      # over shm only: their schedules, executor and matching are the same
      # code over every transport, and each transport's own code runs here
      # under its collectives, sparse, fusion, peer-death and failure scripts
      # (the tcp and ucx sweeps took 262 s of this stage). Over UCX, fusion,
      # sparse and device buffers run the tcp/shm scripts' code above UCX's
      # own, which ucx-collectives, ucx-peer_death, ucx_rndv and the UCX
      # failure scripts reach. Device buffers run here under device.sh,
      # device_ipc.sh and stream.sh; dev_sparse, verbs_gdr_fake and
      # perf_device stage through the same code (304 s of this stage);
      # ucx_netbed is ucx-collectives' transport code between namespaces.
      # The scale scripts (shm_scale, scale_fds: 64 to 128 ranks) run the
      # lazy connection code every other script here runs on 2 to 8 ranks;
      # under ASan their ranks' shadow memory is most of their cost. The
      # mismatch matrix runs over shm: the fingerprint check is the same code
      # over every transport, whose failure paths the transports' failure
      # scripts reach; mismatch_off is mismatch_default's code with the
      # check turned off.
      tests=$(
        echo "$units"
        list_tests "$from" |
          grep -E '^test/(multi|failure|soak)/.*\.sh$' |
          grep -v -E '^test/multi/(tcp|ucx)-(allreduce_algos|coll_more|p2p)\.sh$' |
          grep -v -E '^test/multi/(ucx-(fusion|sparse)|ucx_device)\.sh$' |
          grep -v -E '^test/multi/(dev_sparse|verbs_gdr_fake|perf_device|ucx_netbed)\.sh$' |
          grep -v -E '^test/multi/(shm_scale|scale_fds)\.sh$' |
          grep -v -E '^test/failure/((tcp|ucx|verbs)-mismatch_matrix|mismatch_off)\.sh$'
      )
      tests=$(echo $tests)
      [ -n "$tests" ] || { note "asan: no multi-rank tests found"; status=1; continue; }
    fi
    start=$(date +%s)
    # verbs over its stand-in provider: the suites that reach different
    # transport paths, not the whole list again (test/multi/verbs_fake.sh;
    # sparse sends through the same verbs code as collectives). Peer death,
    # verbs' failure paths, is the one suite: the script's own rows run every
    # collective, size and dtype over verbs (one queue pair per peer without
    # the registration cache on 4 ranks, with it striped over 4 queue pairs
    # on 4 and unevenly over 3 on 3), the verbs paths collectives.sh's 11
    # rows over verbs reached again under schedules that ASan sees over shm
    # and tcp. SC_TEST_SAMPLE: the sweeps run a sample (collectives: 1, 3, 4
    # and 8 ranks; p2p: 2 and 5; coll_more: every dtype on 3 ranks only;
    # allreduce_algos: 2, 5 and 8 ranks; device: tcp on 1, 2, 3, 5, 8 ranks,
    # the forced algorithms on 3 and 8): memory errors follow the code path,
    # not the dtype or every rank count.
    export VERBS_FAKE_SUITES=${VERBS_FAKE_SUITES-peer_death} SC_TEST_SAMPLE=1
    if [ -n "${ASAN_DIST_FROM:-}" ]; then
      (cd "$from" && make -j"$jobs" distcheck ${tests:+TESTS="$tests"} TEST_TIMEOUT=1800 \
        DISTCHECK_CONFIGURE_FLAGS="$flags" >check.out 2>&1)
      rc=$?
      # distcheck removes its tree when it passes and keeps it when it fails.
      logs=$(ls -d "$from"/libsparsecoll-*/_build/sub 2>/dev/null | head -n 1)
    else
      (cd $abd && make -j2 >make.out 2>&1 &&
        make -j"$jobs" check ${tests:+TESTS="$tests"} TEST_TIMEOUT=1800 >check.out 2>&1)
      rc=$?
      logs=$abd
    fi
    unset VERBS_FAKE_SUITES SC_TEST_SAMPLE
    res=$(grep -E '^# (TOTAL|PASS|FAIL|ERROR):' "$from/check.out" 2>/dev/null | tr '\n' ' ')
    if [ $rc -ne 0 ]; then
      status=1
      tail -n 40 "$from/check.out"
      if [ -n "$logs" ]; then
        sh tools/show_failed.sh "$logs"
        grep -lE 'ERROR: (Address|Leak)Sanitizer|runtime error:' $(find "$logs" -name '*.log' \
          ! -name config.log ! -path '*/memcheck/*') 2>/dev/null | head
      fi
    fi
    note "asan: ${ASAN_DIST_FROM:+distcheck, }make check exit $rc in $(($(date +%s) - start)) s: $res"
    unset ASAN_OPTIONS UBSAN_OPTIONS
    ;;
  tsan)
    san="-fsanitize=thread -fno-omit-frame-pointer"
    # No -Werror here: the warning flags are tuned for gcc.
    if ! configure_in $tbd --without-cuda CC=clang CFLAGS="-O1 -g $san" LDFLAGS="$san"; then
      note "tsan: configure failed"
      status=1
      continue
    fi
    # halt_on_error: a race fails the rank, so sc-run and the test fail.
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
    # TSan is 5-15x slower and the machine may be shared: by default a
    # representative subset (every collective on 1-8 ranks over each transport,
    # peer death, a 500-op soak over every algorithm, fusion's worker thread
    # against the caller's, point-to-point over tcp, where a caller drives the
    # lane's engine in turn with its thread); TSAN_TESTS=all runs every multi-rank script over
    # both transports. SC_TEST_SAMPLE=1: fusion.sh's compressed buckets on 3
    # ranks (their worker thread against the caller's is the same on any count).
    tests=${TSAN_TESTS:-"test/multi/tcp-collectives.sh test/multi/shm-collectives.sh \
test/multi/tcp-peer_death.sh test/soak/soak.sh test/multi/fusion.sh test/multi/tcp-p2p.sh"}
    # The default set builds only what its scripts run (make check would
    # build all 130 programs first, most of this stage's time: check-TESTS
    # with the check_* lists emptied runs the tests alone); any other set
    # builds everything.
    progs=
    if [ -z "${TSAN_TESTS:-}" ]; then
      # What the scripts start ("$MR/prog", "$top_builddir/path"); each
      # transport wrapper (tcp-NAME.sh, shm-NAME.sh) runs the script NAME.sh.
      srcs=$(for t in $tests; do echo "$t" | sed -E 's#/(tcp|shm)-#/#'; done)
      progs="libsparsecoll.la sc-run $(cd "$top" && grep -ho '$MR/[A-Za-z0-9_]*\|$top_builddir/[A-Za-z0-9_/.-]*' \
        $srcs | sed 's|^$MR/|test/multi/|; s|^$top_builddir/||' | sort -u | tr '\n' ' ')"
    fi
    [ "$tests" = all ] && tests="test/multi/tcp-collectives.sh test/multi/shm-collectives.sh \
test/multi/tcp-allreduce_algos.sh test/multi/shm-allreduce_algos.sh \
test/multi/tcp-peer_death.sh test/multi/shm-peer_death.sh \
test/multi/tcp-env_launchers.sh test/multi/shm-env_launchers.sh test/soak/soak.sh \
test/multi/fusion.sh test/multi/tcp-p2p.sh"
    start=$(date +%s)
    if [ -n "$progs" ]; then
      (cd $tbd && make -j2 $progs >make.out 2>&1 &&
        SOAK_OPS=500 SC_TEST_SAMPLE=1 make -j2 check-TESTS TESTS="$tests" TEST_TIMEOUT=1800 \
          check_PROGRAMS= check_LTLIBRARIES= check_SCRIPTS= >check.out 2>&1)
    else
      (cd $tbd && make -j2 >make.out 2>&1 &&
        SOAK_OPS=500 SC_TEST_SAMPLE=1 make -j2 check TESTS="$tests" TEST_TIMEOUT=1800 >check.out 2>&1)
    fi
    rc=$?
    res=$(grep -E '^# (TOTAL|PASS|FAIL|ERROR):' $tbd/check.out 2>/dev/null | tr '\n' ' ')
    if [ $rc -ne 0 ]; then
      status=1
      sh tools/show_failed.sh $tbd
      grep -l 'WARNING: ThreadSanitizer' $tbd/test/*/*.log 2>/dev/null
    fi
    note "tsan: multi-rank suite + soak exit $rc in $(($(date +%s) - start)) s: $res"
    unset TSAN_OPTIONS
    ;;
  valgrind)
    command -v valgrind >/dev/null || { note "valgrind: not installed"; status=1; continue; }
    vb=$abd/memcheck
    if ! configure_in $vb --without-cuda --enable-werror --disable-shared CFLAGS="-O2 -g"; then
      note "valgrind: configure failed"
      status=1
      continue
    fi
    if ! (cd $vb && make -j2 sc-run sc_allreduce_perf test/soak/soak >make.out 2>&1); then
      tail -n 30 $vb/make.out
      note "valgrind: build failed"
      status=1
      continue
    fi
    vg="valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect
--show-leak-kinds=definite,indirect --error-exitcode=99 --track-fds=no"
    start=$(date +%s)
    # Valgrind is ~30x slower: a long timeout keeps slow ranks from being declared dead.
    (cd $vb && SC_TIMEOUT_MS=600000 ./sc-run -n 2 --timeout 900 --label $vg \
      ./sc_allreduce_perf -b 8 -e 1M -n 2 >vg_perf.out 2>&1)
    rc1=$?
    (cd $vb && SC_TIMEOUT_MS=600000 ./sc-run -n 4 --timeout 900 --label $vg \
      ./test/soak/soak -n 300 -m 4096 >vg_soak.out 2>&1)
    rc2=$?
    for f in $vb/vg_perf.out $vb/vg_soak.out; do
      grep -E '==[0-9]+== (Invalid|Conditional|Syscall param|[0-9,]+ bytes in)' "$f" | head -n 5
    done
    [ $rc1 -ne 0 ] || [ $rc2 -ne 0 ] && status=1
    note "valgrind: sc_allreduce_perf -n 2 exit $rc1, soak -n 4 (300 ops) exit $rc2 ($(($(date +%s) - start)) s; 99 = memcheck errors or leaks)"
    ;;
  *)
    echo "sanitize.sh: unknown step $step (asan, tsan, valgrind)"
    exit 2
    ;;
  esac
done
echo "---- sanitize summary"
printf '%s' "$summary"
exit $status
