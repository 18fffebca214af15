#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# SC_TRANSPORT=ucx on the emulated cluster: sc-netbed brings up 4 hosts at
# 1 Gbit/s and sc-run --netbed runs, one rank per host, every collective,
# each all-reduce algorithm forced, the sparse suite and fusion, all checked
# against their references as on loopback (mr_collectives, mr_sparse,
# mr_fusion). UCX is held to its TCP transport on the bed's interface
# (UCX_TLS=tcp,self, UCX_NET_DEVICES=nbeth0): the hosts are namespaces of one
# machine, and UCX's shared memory would reach across them past the shaped
# links. UCX lists network devices from /sys/class/net, which shows the
# namespace that mounted /sys, so each rank remounts /sys in a mount
# namespace of its own first (ucx_in_netns below).
# Skipped (77) unless root with network namespaces, veth, bridge, tbf and
# unshare.
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
. "$top_srcdir/test/multi/lib.sh"
NETBED="$top_srcdir/tools/netbed"
[ -x "$top_builddir/sc-netbed" ] && NETBED="$top_builddir/sc-netbed"
ID="u$$"

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: the ucx bed test needs root (it creates network namespaces)"
  exit 77
fi
for tool in ip tc unshare mount; do
  command -v $tool >/dev/null 2>&1 || { echo "SKIP: the ucx bed test needs '$tool'"; exit 77; }
done
if ! out=$("$NETBED" check 2>&1); then
  echo "SKIP: no emulated cluster here: $out"
  exit 77
fi
trap '"$NETBED" --id "$ID" down >/dev/null 2>&1; "$NETBED" --id "${ID}m" down >/dev/null 2>&1
  rm -rf "$tmpdir"' EXIT
"$NETBED" --id "$ID" up 4 1gbit >"$tmpdir/up" 2>&1 || {
  cat "$tmpdir/up"
  echo "FAIL: sc-netbed up"
  exit 1
}
cat >"$tmpdir/ucx_in_netns" <<'EOF'
#!/bin/sh
exec unshare -m --propagation private sh -c 'umount -l /sys 2>/dev/null; mount -t sysfs sysfs /sys && exec "$@"' sh "$@"
EOF
chmod +x "$tmpdir/ucx_in_netns"
export SC_TRANSPORT=ucx UCX_TLS=tcp,self UCX_NET_DEVICES=nbeth0
bed() { # bed PROG [ARGS...]: 4 ranks, one per host
  "$SC_RUN" --netbed="scnb-$ID" -n 4 --timeout 300 --label "$tmpdir/ucx_in_netns" "$@"
}
# Without RDMA every rank reaches the other hosts through its net lane, a
# UCP context of its own that sends eagerly (transport/ucx/ucx_internal.h).
lanes() {
  SC_DEBUG=INFO SC_DEBUG_SUBSYS=NET "$SC_RUN" --netbed="scnb-$ID" -n 4 --timeout 300 \
    "$tmpdir/ucx_in_netns" "$top_builddir/sc_allreduce_perf" -b 1M -e 1M -n 3 -w 1 \
    >"$tmpdir/lanes" 2>&1 || return 1
  [ "$(grep -c 'inf between hosts' "$tmpdir/lanes")" -eq 4 ] &&
    [ "$(grep -c "0 on this host, 3 on other hosts; 3 through the net lane's own context" \
      "$tmpdir/lanes")" -eq 4 ] &&
    [ "$(awk '$1 == 1048576 && $9 == 0 && $13 == 0' "$tmpdir/lanes" | wc -l)" -eq 1 ]
}
check "bed n=4: other hosts through the eager net lane, results right" lanes
check "bed n=4: every collective over ucx" bed "$MR/mr_collectives"
for algo in ring tree rd rabenseifner; do
  check "bed n=4: SC_ALGO=$algo over ucx" env SC_ALGO=$algo \
    "$SC_RUN" --netbed="scnb-$ID" -n 4 --timeout 300 --label "$tmpdir/ucx_in_netns" \
    "$MR/mr_collectives" --allreduce-only
done
check "bed n=4: sparse over ucx" bed "$MR/mr_sparse"
check "bed n=4: fusion over ucx" bed "$MR/mr_fusion"
"$NETBED" --id "$ID" down >/dev/null 2>&1

# Two hosts of two ranks: each rank has both lanes, UCX's shared memory to
# the rank of its host and the eager net lane to the other host's two.
mixed() { # mixed PROG [ARGS...]
  UCX_TLS=tcp,sm,self UCX_NET_DEVICES=nbeth0,lo "$SC_RUN" --netbed="scnb-${ID}m" -n 4 \
    --timeout 300 "$tmpdir/ucx_in_netns" "$@"
}
mixed_lanes() {
  SC_DEBUG=INFO SC_DEBUG_SUBSYS=NET mixed "$MR/mr_collectives" --allreduce-only \
    >"$tmpdir/mixed" 2>&1 || return 1
  [ "$(grep -c "1 on this host, 2 on other hosts; 2 through the net lane's own context" \
    "$tmpdir/mixed")" -ge 4 ]
}
if "$NETBED" --id "${ID}m" up 2 1gbit --ranks-per-host 2 >"$tmpdir/up" 2>&1; then
  check "bed 2 hosts x 2: both lanes in each rank, every all-reduce right" mixed_lanes
  mixed_hier() { SC_ALGO=hier mixed "$MR/mr_collectives" --allreduce-only; }
  check "bed 2 hosts x 2: SC_ALGO=hier over both lanes" mixed_hier
else
  cat "$tmpdir/up"
  check "sc-netbed up 2 hosts x 2 ranks" false
fi
finish
