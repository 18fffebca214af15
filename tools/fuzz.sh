#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Fuzzes the parsers of untrusted bytes (test/fuzz/fuzz_*.c: bootstrap, TCP
# segment headers, setup messages and the receive path, the shm ring and its
# records, the liveness watch's frames) with libFuzzer, ASan and UBSan
# (clang), each target for FUZZ_TIME seconds (default 60), one libFuzzer job
# each. Builds in build-fuzz
# (FUZZ_BUILD). What libFuzzer learns stays in build-fuzz/corpus-<target>; a
# crash, leak, timeout or OOM input is written to test/fuzz/corpus/<target>/,
# where `make check` replays it from then on, and the script fails. FUZZ_JOBS
# targets run at once (default: the number of cores).
# Usage: sh tools/fuzz.sh [target...]   (targets: bootstrap reply unique_id
# tcp_header tcp_hello tcp_stream shm_ring watch_frame; default all)
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)
t_each=${FUZZ_TIME:-60}
bdir=$top/${FUZZ_BUILD:-build-fuzz}
targets=${*:-bootstrap reply unique_id tcp_header tcp_hello tcp_stream shm_ring watch_frame}
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

command -v clang >/dev/null || { echo "fuzz.sh: clang is required (apt-get install clang)"; exit 1; }
[ -x configure ] || autoreconf -fi >/dev/null
mkdir -p "$bdir"
cd "$bdir"
if [ ! -f Makefile ]; then
  echo "fuzz.sh: configuring $bdir (clang, $san, coverage for libFuzzer)"
  "$top/configure" --without-cuda CC=clang CFLAGS="-O1 -g $san -fsanitize=fuzzer-no-link" \
    LDFLAGS="$san" \
    >configure.out 2>&1 || { tail -n 30 configure.out; exit 1; }
fi
make -j2 libsc_core.la >make.out 2>&1 || { tail -n 30 make.out; exit 1; }

# Build every target first, then fuzz them FUZZ_JOBS at a time (default: one
# per core; each libFuzzer run is one process on one core): with 8 targets on
# 2 cores the stage takes 4 x FUZZ_TIME instead of 8 x FUZZ_TIME.
for t in $targets; do
  src=$top/test/fuzz/fuzz_$t.c
  [ -f "$src" ] || { echo "fuzz.sh: no target $t"; exit 2; }
  clang -O1 -g $san -fsanitize=fuzzer -D_GNU_SOURCE -I"$top" -I"$top/include" -I. -Iinclude "$src" \
    .libs/libsc_core.a -lm -lpthread -o "fuzz_$t"
  mkdir -p "corpus-$t"
  rm -f "fuzz_$t.result"
done

fuzz_one() { # fuzz_one TARGET: fuzz it, write its summary line (and FAILED) to fuzz_TARGET.result
  t=$1
  seeds=$top/test/fuzz/corpus/$t
  before=$(ls "$seeds" | wc -l)
  echo "fuzz.sh: fuzzing $t for $t_each s"
  rc=0
  # New inputs go to corpus-<t> (first directory); the checked-in seeds are read only.
  "./fuzz_$t" -max_total_time="$t_each" -timeout=10 -rss_limit_mb=2048 -use_value_profile=1 \
    -print_final_stats=1 -artifact_prefix="$seeds/" "corpus-$t" "$seeds" >"fuzz_$t.log" 2>&1 ||
    rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "fuzz_$t.log")
  secs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "fuzz_$t.log")
  cov=$(grep -o 'cov: [0-9]*' "fuzz_$t.log" | tail -n 1)
  after=$(ls "$seeds" | wc -l)
  line="$t: ${execs:-?} executions in $t_each s (${secs:-?}/s), $cov, corpus $(ls "corpus-$t" | wc -l) inputs"
  if [ "$rc" -ne 0 ] || [ "$after" -ne "$before" ]; then
    line="$line, FAILED (exit $rc): new regression input(s) in test/fuzz/corpus/$t/"
    grep -E 'ERROR|property failed|SUMMARY' "fuzz_$t.log" | head -n 5
  fi
  echo "$line" >"fuzz_$t.result"
}

jobs=${FUZZ_JOBS:-$(nproc)}
lane=0
while [ "$lane" -lt "$jobs" ]; do
  # Lane L fuzzes targets L, L + jobs, L + 2 * jobs, ... one after another.
  (
    i=0
    for t in $targets; do
      [ $((i % jobs)) -eq "$lane" ] && fuzz_one "$t"
      i=$((i + 1))
    done
  ) &
  lane=$((lane + 1))
done
wait

status=0
summary=""
for t in $targets; do
  if [ ! -f "fuzz_$t.result" ]; then
    line="$t: FAILED (no result: its run did not finish)"
  else
    line=$(cat "fuzz_$t.result")
  fi
  case $line in *FAILED*) status=1 ;; esac
  echo "$line"
  summary="$summary$line
"
done
echo "---- fuzz summary"
printf '%s' "$summary"
exit $status
