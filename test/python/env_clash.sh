#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sc_comm_init_env under torchrun's variables with MASTER_PORT held by torch's
# store: the bind error names MASTER_PORT; SC_ROOT_ADDR is honoured.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python
# Either random port may be taken by a test running alongside: the held one
# before the holder gets it (exit 3, "HOLDER:"), or SC_ROOT_ADDR's. Only those
# failures, said as such, are retried.
clash() {
  for try in 1 2 3; do
    "$PYTHON" "$PYT/env_clash.py" "$MR/mr_env" "$(rand_port)" "$(rand_port)" >"$tmpdir/clash" 2>&1 && { cat "$tmpdir/clash"; return 0; }
    cat "$tmpdir/clash"
    grep -q '^HOLDER: cannot hold port' "$tmpdir/clash" && continue
    grep -q 'FAIL: ranks failed with SC_ROOT_ADDR' "$tmpdir/clash" && grep -q 'bind.*in use' "$tmpdir/clash" || return 1
  done
  return 1
}
check "torchrun variables, MASTER_PORT held, SC_ROOT_ADDR" clash
finish
