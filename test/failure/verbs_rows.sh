#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# SC_TRANSPORT=verbs where it cannot run and with bad SC_IB_* settings, on 2 ranks
# under sc-run (fail_verbs prints each rank's code and message):
# - no RDMA device: every rank SC_ERR_UNSUPPORTED "no RDMA device: ...", also when
#   SC_IB_HCA names a device (with zero devices the missing hardware is reported,
#   not the name: there is nothing to check the name against);
# - with devices: SC_IB_HCA naming none of them is SC_ERR_INVALID_ARG naming it;
# - a malformed or out-of-range SC_IB_* value is SC_ERR_INVALID_ARG naming the
#   variable, with or without devices (settings are checked first);
# - SC_TRANSPORT=auto never selects verbs: it ignores a bad SC_IB_* value and its
#   all-reduce is right;
# - libsparsecoll.so has no NEEDED entry for libibverbs.
. "$top_srcdir/test/failure/fail_lib.sh"
if ls /sys/class/infiniband/* >/dev/null 2>&1; then have_dev=1; else have_dev=0; fi
echo "RDMA devices in /sys/class/infiniband: $have_dev"

# expect CODE TEXT [VAR=VALUE...]: both ranks print CODE and TEXT.
expect() {
  code=$1 text=$2
  shift 2
  env SC_TIMEOUT_MS=10000 "$@" "$SC_RUN" -n 2 --timeout 60 "$FAIL/fail_verbs" >"$tmpdir/run" 2>&1
  cat "$tmpdir/run"
  [ "$(grep -c "^RESULT rank [01] $code: .*$text" "$tmpdir/run")" -eq 2 ]
}

if [ $have_dev -eq 0 ]; then
  check "verbs without a device" expect SC_ERR_UNSUPPORTED "no RDMA device: " SC_TRANSPORT=verbs
  check "verbs without a device, SC_IB_HCA=nosuch0" \
    expect SC_ERR_UNSUPPORTED "no RDMA device: " SC_TRANSPORT=verbs SC_IB_HCA=nosuch0
else
  check "verbs, SC_IB_HCA=nosuch0" \
    expect SC_ERR_INVALID_ARG "no RDMA device named 'nosuch0'" SC_TRANSPORT=verbs SC_IB_HCA=nosuch0
  check "verbs, SC_IB_HCA=^all" expect SC_ERR_INVALID_ARG "excludes every RDMA device" \
    SC_TRANSPORT=verbs "SC_IB_HCA=^$(ls /sys/class/infiniband | paste -sd, -)"
fi
for bad in SC_IB_QPS_PER_PEER=0 SC_IB_QPS_PER_PEER=17 SC_IB_TIMEOUT=32 SC_IB_RETRY_CNT=8 \
  SC_IB_GID_INDEX=abc SC_IB_REG_CACHE_BYTES=lots SC_IB_HCA=mlx5_0:0 SC_IB_HCA=a,,b; do
  check "verbs, $bad" expect SC_ERR_INVALID_ARG "${bad%%=*}" SC_TRANSPORT=verbs "$bad"
done
# The library does not link libibverbs (it dlopen()s it), so it loads without rdma-core.
not_linked() {
  lib="$top_builddir/.libs/libsparsecoll.so"
  [ -f "$lib" ] || { echo "no $lib (static build): nothing to check"; return 0; }
  objdump -p "$lib" | grep NEEDED
  ! objdump -p "$lib" | grep -q 'NEEDED.*libibverbs'
}
check "libsparsecoll.so does not link libibverbs" not_linked
auto_ok() {
  env SC_TRANSPORT=auto SC_IB_QPS_PER_PEER=0 SC_IB_HCA=nosuch0 "$SC_RUN" -n 3 --timeout 60 \
    "$FAIL/fail_verbs" >"$tmpdir/run" 2>&1
  cat "$tmpdir/run"
  [ "$(grep -c '^RESULT rank [012] ok sum 3$' "$tmpdir/run")" -eq 3 ]
}
check "auto ignores the verbs settings" auto_ok
finish
