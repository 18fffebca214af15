#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc-run --bind core|numa|none, read back from the kernel: every thread of
# every rank (the library's progress thread included, created after the
# binding) reports its Cpus_allowed_list (test/multi/mr_bind_check). The
# reference is this script's own affinity and /sys: with one NUMA node and
# one CPU per core, --bind core gives rank r the r mod K-th allowed CPU;
# elsewhere each rank gets one allowed CPU, distinct while ranks <= CPUs.
# Also sc-info --topo: it counts the same CPUs and names its source.
top_builddir=${top_builddir:-.}
SC_RUN="$top_builddir/sc-run"
CHECK="$top_builddir/test/multi/mr_bind_check"
pass=0
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bind_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() {
  fail=$((fail + 1))
  echo "FAIL: $1"
  sed 's/^/  /' "$tmp/out" "$tmp/err" 2>/dev/null | tail -n 20
}
expand() { # "0-2,5" -> "0 1 2 5"
  echo "$1" | tr ',' '\n' | while IFS=- read -r a b; do
    [ -n "$a" ] || continue
    seq "$a" "${b:-$a}"
  done | tr '\n' ' ' | sed 's/ $//'
}
allowed_list=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
allowed=$(expand "$allowed_list")
k=$(echo "$allowed" | wc -w)
nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
smt=0
for c in $allowed; do
  sib=/sys/devices/system/cpu/cpu$c/topology/thread_siblings_list
  [ -r "$sib" ] && [ "$(expand "$(cat "$sib")" | wc -w)" -gt 1 ] && smt=1
done
simple=0
[ "$nodes" -le 1 ] && [ $smt -eq 0 ] && simple=1
n=$((k + 1)) # every CPU once, and one rank wraps around

# --- core
if "$SC_RUN" -n $n --timeout 60 --bind core "$CHECK" >"$tmp/out" 2>"$tmp/err"; then
  good=1
  seen=""
  for r in $(seq 0 $((n - 1))); do
    line=$(grep "^$r " "$tmp/out")
    cpus=$(echo "$line" | awk '{print $2}')
    threads=$(echo "$line" | awk '{print $3}')
    same=$(echo "$line" | awk '{print $4}')
    [ "$(expand "$cpus" | wc -w)" -eq 1 ] || good=0
    echo " $allowed " | grep -q " $cpus " || good=0
    [ "${threads:-0}" -ge 2 ] && [ "$same" = 1 ] || good=0
    if [ $simple -eq 1 ]; then
      want=$(echo "$allowed" | awk -v i=$((r % k + 1)) '{print $i}')
      [ "$cpus" = "$want" ] || good=0
    elif [ "$r" -lt "$k" ]; then
      echo " $seen " | grep -q " $cpus " && good=0
      seen="$seen $cpus"
    fi
  done
  [ $good -eq 1 ] && ok "--bind core: $n ranks on $k CPUs, one CPU each (all threads)" ||
    bad "--bind core placement"
else
  bad "--bind core: sc-run failed"
fi

# --- none: every rank keeps sc-run's own CPUs
if "$SC_RUN" -n 2 --timeout 60 --bind none "$CHECK" >"$tmp/out" 2>"$tmp/err" &&
  [ "$(awk -v l="$allowed_list" '$2 == l && $3 >= 2 && $4 == 1' "$tmp/out" | wc -l)" -eq 2 ]; then
  ok "--bind none: both ranks on $allowed_list"
else
  bad "--bind none"
fi

# --- numa: rank r on every allowed CPU of the r mod N-th node that has one
if "$SC_RUN" -n 2 --timeout 60 --bind numa "$CHECK" >"$tmp/out" 2>"$tmp/err"; then
  good=1
  nlist=""
  for d in $(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | sort -V); do
    mine=""
    for c in $(expand "$(cat "$d/cpulist")"); do
      echo " $allowed " | grep -q " $c " && mine="$mine $c"
    done
    [ -n "$mine" ] && nlist="$nlist|$mine"
  done
  [ -n "$nlist" ] || nlist="| $allowed"
  nn=$(echo "$nlist" | tr '|' '\n' | grep -c .)
  for r in 0 1; do
    want=$(echo "$nlist" | tr '|' '\n' | grep . | sed -n "$((r % nn + 1))p" | sed 's/^ //')
    got=$(expand "$(awk -v r=$r '$1 == r {print $2}' "$tmp/out")")
    [ "$got" = "$want" ] || good=0
    [ "$(awk -v r=$r '$1 == r {print $4}' "$tmp/out")" = 1 ] || good=0
  done
  [ $good -eq 1 ] && ok "--bind numa: ranks on their node's CPUs ($nn node(s))" || bad "--bind numa"
else
  bad "--bind numa: sc-run failed"
fi

# --- a wrong mode is a usage error
"$SC_RUN" -n 1 --bind socket true >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "core, numa or none" "$tmp/err" && ok "--bind socket: usage error" ||
  bad "--bind socket (rc=$rc)"

# --- sc-info --topo
if "$top_builddir/sc-info" --topo >"$tmp/out" 2>"$tmp/err" &&
  grep -Eq "^  CPUs: +$k usable of [0-9]+ online" "$tmp/out" &&
  grep -Eq '^topology \((hwloc, API|hwloc not built)' "$tmp/out" &&
  [ "$(sed -n 's/^  sc-run --bind core order://p' "$tmp/out" | tr ' ' '\n' | grep . | sort -n | tr '\n' ' ' | sed 's/ $//')" = "$allowed" ]; then
  ok "sc-info --topo: $k usable CPUs, the binding order a permutation of them"
else
  bad "sc-info --topo"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
