#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The torch.distributed backend "sparsecoll" under torchrun's variables (the
# store on MASTER_PORT: no clash): every collective on 1..4 ranks.
. "$top_srcdir/test/multi/lib.sh"
. "$top_srcdir/test/python/lib.sh"
need_python numpy torch
for n in 1 2 3 4; do
  check "torch backend collectives n=$n" torchrun_like "$n" "$PYTHON" "$PYT/torch_backend.py"
done
finish
