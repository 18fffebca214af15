#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# examples/kfac_mlp.py on 4 ranks (sc-run): distributed K-FAC through
# sparsecoll.torch.kfac (factors reduced to their owners and inverses
# broadcast, packed and fused per owner) must end with a lower held-out loss
# than SGD from the same start after the same steps, every rank holding the
# same weights (--check).
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python torch
check "examples/kfac_mlp.py, 4 ranks, 60 steps: K-FAC below SGD, ranks identical" \
  "$SC_RUN" -n 4 --timeout 240 "$PYTHON" "$top_srcdir/examples/kfac_mlp.py" --steps 60 --check
finish
