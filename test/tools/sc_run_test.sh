#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Tests of the sc-run launcher with plain shell ranks (no library needed).
# Runs from any build directory: top_builddir locates sc-run.
top_builddir=${top_builddir:-.}
SC_RUN="$top_builddir/sc-run"
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sc_run_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() {
  fail=$((fail + 1))
  echo "FAIL: $1"
  for f in "$tmp/out" "$tmp/err"; do
    [ -s "$f" ] && sed "s|^|  $(basename "$f"): |" "$f"
  done
}
now() { date +%s; }

if [ ! -x "$SC_RUN" ]; then
  echo "FAIL: $SC_RUN not built"
  echo "0 passed, 1 failed"
  exit 1
fi

# --- every rank gets a distinct SC_RANK and the same world, root and token
"$SC_RUN" -n 4 sh -c 'echo "$SC_RANK $SC_WORLD_SIZE $SC_ROOT_ADDR $SC_AUTH_TOKEN"' \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
ranks=$(cut -d' ' -f1 "$tmp/out" | sort -n | tr '\n' ' ')
shared=$(cut -d' ' -f2- "$tmp/out" | sort -u | wc -l)
world=$(cut -d' ' -f2 "$tmp/out" | sort -u)
root=$(cut -d' ' -f3 "$tmp/out" | sort -u)
token=$(cut -d' ' -f4 "$tmp/out" | sort -u)
if [ $rc -eq 0 ] && [ "$ranks" = "0 1 2 3 " ] && [ "$shared" -eq 1 ] && [ "$world" = 4 ] &&
  echo "$root" | grep -Eq '^127\.0\.0\.1:[0-9]+$' &&
  echo "$token" | grep -Eq '^[0-9a-f]{64}$'; then
  ok "environment: distinct ranks, shared world/root/token"
else
  bad "environment (rc=$rc ranks='$ranks' shared=$shared world=$world root=$root token=$token)"
fi

# --- a fresh token each run
"$SC_RUN" -n 1 sh -c 'echo $SC_AUTH_TOKEN' >"$tmp/t2" 2>"$tmp/err"
if [ "$(cat "$tmp/t2")" != "$token" ] && grep -Eq '^[0-9a-f]{64}$' "$tmp/t2"; then
  ok "token differs between runs"
else
  bad "token differs between runs"
fi

# --- --port and -x
"$SC_RUN" -n 2 --port 23456 -x FOO=bar -x BAZ=a=b sh -c 'echo "$SC_ROOT_ADDR $FOO $BAZ"' \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(sort -u "$tmp/out")" = "127.0.0.1:23456 bar a=b" ] &&
  [ "$(wc -l <"$tmp/out")" -eq 2 ]; then
  ok "--port and -x VAR=VALUE"
else
  bad "--port and -x (rc=$rc)"
fi

# --- program arguments pass through untouched, options after the program included
"$SC_RUN" -n 1 sh -c 'echo "$#:$1:$2"' prog -n 7 >"$tmp/out" 2>"$tmp/err"
if [ "$(cat "$tmp/out")" = "2:-n:7" ]; then
  ok "arguments after the program are the program's"
else
  bad "arguments after the program are the program's"
fi

# --- --label prefixes whole lines of stdout and stderr; partial last lines are flushed
"$SC_RUN" -n 3 --label sh -c 'echo "out $SC_RANK"; echo "err $SC_RANK" >&2; printf "tail $SC_RANK"' \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
good=1
for r in 0 1 2; do
  grep -qx "\[$r\] out $r" "$tmp/out" || good=0
  grep -qx "\[$r\] tail $r" "$tmp/out" || good=0
  grep -qx "\[$r\] err $r" "$tmp/err" || good=0
done
[ "$(wc -l <"$tmp/out")" -eq 6 ] || good=0
if [ $rc -eq 0 ] && [ $good -eq 1 ]; then
  ok "--label prefixes stdout and stderr lines"
else
  bad "--label (rc=$rc)"
fi

# --- long output through --label keeps every line whole
"$SC_RUN" -n 2 -l sh -c 'i=0; while [ $i -lt 2000 ]; do echo "rank $SC_RANK line $i xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"; i=$((i+1)); done' \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
lines=$(wc -l <"$tmp/out")
malformed=$(grep -Evc '^\[([01])\] rank \1 line [0-9]+ x{50}$' "$tmp/out")
if [ $rc -eq 0 ] && [ "$lines" -eq 4000 ] && [ "$malformed" -eq 0 ]; then
  ok "--label keeps 4000 lines whole"
else
  bad "--label long output (rc=$rc lines=$lines malformed=$malformed)"
fi

# --- without --label the output is not prefixed
"$SC_RUN" -n 2 sh -c 'echo plain' >"$tmp/out" 2>"$tmp/err"
if [ "$(sort -u "$tmp/out")" = "plain" ]; then
  ok "no prefix without --label"
else
  bad "no prefix without --label"
fi

# --- a failing rank stops the job: reported, others killed within the grace period
start=$(now)
"$SC_RUN" -n 3 --grace 1 sh -c 'if [ "$SC_RANK" = 2 ]; then exit 3; fi; sleep 60' \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
elapsed=$(($(now) - start))
if [ $rc -eq 3 ] && [ $elapsed -lt 20 ] &&
  grep -q 'rank 2 (pid [0-9]*) exited with status 3' "$tmp/err" &&
  grep -q 'stopping the other ranks' "$tmp/err" &&
  grep -q 'rank 0 (pid [0-9]*) was killed by signal 15' "$tmp/err"; then
  ok "rank exiting 3: exit 3 after ${elapsed}s, reported, others stopped"
else
  bad "rank exiting 3 (rc=$rc elapsed=${elapsed}s)"
fi

# --- the default grace period applies too, and sleeping helpers of a rank are killed
start=$(now)
"$SC_RUN" -n 2 sh -c 'if [ "$SC_RANK" = 1 ]; then exit 4; fi; sleep 60 & wait' \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
elapsed=$(($(now) - start))
if [ $rc -eq 4 ] && [ $elapsed -lt 20 ]; then
  ok "default grace: exit 4 after ${elapsed}s"
else
  bad "default grace (rc=$rc elapsed=${elapsed}s)"
fi

# --- a rank killed by SIGKILL is reported as such; exit 128+9
"$SC_RUN" -n 2 --grace 1 sh -c 'if [ "$SC_RANK" = 1 ]; then kill -9 $$; fi; sleep 60' \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 137 ] && grep -q 'rank 1 (pid [0-9]*) was killed by signal 9' "$tmp/err"; then
  ok "rank killed by SIGKILL: reported, exit 137"
else
  bad "rank killed by SIGKILL (rc=$rc)"
fi

# --- a rank that ignores SIGTERM gets SIGKILL
start=$(now)
# (rank 1 fails only once rank 0 has installed its trap)
"$SC_RUN" -n 2 --grace 0 -x READY="$tmp/ready" sh -c '
  if [ "$SC_RANK" = 1 ]; then while [ ! -e "$READY" ]; do sleep 0.1; done; exit 5; fi
  trap "" TERM; touch "$READY"; while :; do sleep 1; done' >"$tmp/out" 2>"$tmp/err"
rc=$?
elapsed=$(($(now) - start))
if [ $rc -eq 5 ] && [ $elapsed -lt 20 ] && grep -q 'rank 0 (pid [0-9]*) was killed by signal 9' "$tmp/err" &&
  grep -q 'ranks still running after SIGTERM: 0; sending SIGKILL' "$tmp/err"; then
  ok "SIGTERM ignored: SIGKILL follows (${elapsed}s)"
else
  bad "SIGTERM ignored (rc=$rc elapsed=${elapsed}s)"
fi

# --- --timeout kills a hung job, exits 124 and names the ranks still running
start=$(now)
"$SC_RUN" -n 3 --timeout 1 sh -c 'if [ "$SC_RANK" = 1 ]; then exit 0; fi; sleep 60' \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
elapsed=$(($(now) - start))
if [ $rc -eq 124 ] && [ $elapsed -lt 20 ] &&
  grep -q 'timeout after 1 s; ranks still running: 0,2$' "$tmp/err"; then
  ok "--timeout: exit 124, names ranks 0,2 (${elapsed}s)"
else
  bad "--timeout (rc=$rc elapsed=${elapsed}s)"
fi

# --- a program that cannot be started
"$SC_RUN" -n 2 ./no-such-program-here >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 127 ] && grep -q "cannot execute './no-such-program-here'" "$tmp/err"; then
  ok "missing program: exit 127 with a message"
else
  bad "missing program (rc=$rc)"
fi

# --- SIGTERM to sc-run is forwarded to the ranks
"$SC_RUN" -n 2 -x READY="$tmp/ready-" sh -c 'trap "echo got-term-$SC_RANK; exit 0" TERM
  touch "$READY$SC_RANK"; sleep 60 & wait' >"$tmp/out" 2>"$tmp/err" &
pid=$!
waited=0
while { [ ! -e "$tmp/ready-0" ] || [ ! -e "$tmp/ready-1" ]; } && [ $waited -lt 100 ]; do
  sleep 0.1
  waited=$((waited + 1))
done
kill -TERM $pid
wait $pid
rc=$?
if [ $rc -eq 143 ] && grep -q got-term-0 "$tmp/out" && grep -q got-term-1 "$tmp/out"; then
  ok "SIGTERM forwarded to every rank, exit 143"
else
  bad "SIGTERM forwarding (rc=$rc)"
fi

# --- usage errors and --help
"$SC_RUN" sh -c true >"$tmp/out" 2>"$tmp/err"
rc1=$?
"$SC_RUN" -n 0 sh -c true >"$tmp/out" 2>"$tmp/err"
rc2=$?
"$SC_RUN" --help >"$tmp/out" 2>"$tmp/err"
rc3=$?
if [ $rc1 -eq 2 ] && [ $rc2 -eq 2 ] && [ $rc3 -eq 0 ] && grep -q '^Usage: sc-run -n N' "$tmp/out"; then
  ok "usage errors exit 2; --help exits 0"
else
  bad "usage errors / --help (rc=$rc1,$rc2,$rc3)"
fi

# --- all ranks exit 0: exit 0, nothing on stderr
"$SC_RUN" -n 8 sh -c 'exit 0' >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ ! -s "$tmp/err" ]; then
  ok "8 ranks exiting 0: exit 0, quiet"
else
  bad "8 ranks exiting 0 (rc=$rc)"
fi

# --- binding: rank r on CPU r mod K of sc-run's own CPUs; none leaves the mask
# Expands a Cpus_allowed_list such as 0-3,6 into one CPU per line.
expand_cpus() {
  echo "$1" | tr ',' '\n' | while IFS=- read -r lo hi; do seq "$lo" "${hi:-$lo}"; done
}
allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
expand_cpus "$allowed" >"$tmp/cpus"
k=$(wc -l <"$tmp/cpus")
n=$((2 * k + 1))
report='echo "$SC_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
ranks_all_on() { # ranks_all_on N CPUS: the N ranks of the last run each reported CPUS
  [ "$(wc -l <"$tmp/out")" -eq "$1" ] && [ "$(cut -d' ' -f2 "$tmp/out" | sort -u)" = "$2" ]
}
"$SC_RUN" -n $n sh -c "$report" >"$tmp/out" 2>"$tmp/err"
rc=$?
: >"$tmp/want"
r=0
while [ $r -lt $n ]; do
  echo "$r $(sed -n "$((r % k + 1))p" "$tmp/cpus")" >>"$tmp/want"
  r=$((r + 1))
done
sort -n "$tmp/out" >"$tmp/got"
if [ $rc -eq 0 ] && cmp -s "$tmp/got" "$tmp/want"; then
  ok "default binding: $n ranks round robin over $k CPUs"
else
  bad "default binding (rc=$rc)"
  diff "$tmp/want" "$tmp/got"
fi
"$SC_RUN" -n 3 --bind none sh -c "$report" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && ranks_all_on 3 "$allowed"; then
  ok "--bind none: every rank keeps sc-run's CPUs ($allowed)"
else
  bad "--bind none (rc=$rc)"
fi
last=$(tail -n 1 "$tmp/cpus")
if command -v taskset >/dev/null 2>&1; then
  taskset -c "$last" "$SC_RUN" -n 3 sh -c "$report" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 0 ] && ranks_all_on 3 "$last"; then
    ok "binding stays inside sc-run's own mask (CPU $last)"
  else
    bad "binding under taskset -c $last (rc=$rc)"
  fi
else
  echo "SKIP: taskset not installed: binding inside an outer mask not run"
fi
"$SC_RUN" -n 2 --bind socket sh -c true >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q 'expected core, numa or none' "$tmp/err"; then
  ok "--bind with an unknown value: usage error"
else
  bad "--bind socket (rc=$rc)"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
