#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# 8 ranks on this (2-core) machine: 1000 small all-reduces (x2 dtypes), each
# result checked, over shared memory and with auto (all peers local); spinning
# ranks must yield the cores so that none times out (SC_TIMEOUT_MS=60000).
# Then a job whose ranks 2.. claim another host (own UTS namespace, when
# unshare is allowed): auto mixes shm and tcp in one communicator, shm refuses.
. "$top_srcdir/test/multi/lib.sh"
export SC_TIMEOUT_MS=60000
check "8 ranks, 1000 small all-reduces, shm" env SC_TRANSPORT=shm "$SC_RUN" -n 8 --timeout 300 \
  --label "$MR/mr_shm" many 1000
check "8 ranks, 1000 small all-reduces, auto" env SC_TRANSPORT=auto "$SC_RUN" -n 8 --timeout 300 \
  --label "$MR/mr_shm" many 1000

cat >"$tmpdir/otherhost" <<'EOS'
#!/bin/sh
# Ranks >= 2 run with another hostname: another host as far as the library can tell.
if [ "$SC_RANK" -ge 2 ]; then
  exec unshare --uts sh -c 'hostname sc-other-host && exec "$@"' sh "$@"
fi
exec "$@"
EOS
chmod +x "$tmpdir/otherhost"
if unshare --uts true 2>/dev/null; then
  check "mixed: 2 ranks here, 2 on 'another host', auto, collectives" env SC_TRANSPORT=auto \
    "$SC_RUN" -n 4 --timeout 300 --label "$tmpdir/otherhost" "$MR/mr_collectives"
  check "mixed: 3 + 2 ranks, auto, small all-reduces" env SC_TRANSPORT=auto \
    "$SC_RUN" -n 5 --timeout 300 --label "$tmpdir/otherhost" "$MR/mr_shm" many 200
  refused() {
    SC_TRANSPORT=shm SC_TIMEOUT_MS=20000 "$SC_RUN" -n 3 --timeout 60 --label "$tmpdir/otherhost" \
      "$MR/mr_shm" init >"$tmpdir/run" 2>&1
    cat "$tmpdir/run"
    [ "$(grep -c 'init: unsupported.*not on this host' "$tmpdir/run")" -ge 1 ]
  }
  check "mixed: SC_TRANSPORT=shm refuses a peer on another host" refused
else
  echo "SKIP: mixed-host checks (unshare --uts is not allowed here)"
fi
finish
