#!/bin/sh
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
trap '"$NETBED" --id "$ID" down >/dev/null 2>&1; rm -rf "$tmpdir"' EXIT
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
check "bed n=4: every collective over ucx" bed "$MR/mr_collectives"
for algo in ring tree rd rabenseifner; do
  check "bed n=4: SC_ALGO=$algo over ucx" env SC_ALGO=$algo \
    "$SC_RUN" --netbed="scnb-$ID" -n 4 --timeout 300 --label "$tmpdir/ucx_in_netns" \
    "$MR/mr_collectives" --allreduce-only
done
check "bed n=4: sparse over ucx" bed "$MR/mr_sparse"
check "bed n=4: fusion over ucx" bed "$MR/mr_fusion"
finish
