# SPDX-License-Identifier: BSD-3-Clause
"""The names the package accepts for sparse algorithms and fusion policies
are the library's: each map equals what sc_sparse_algo_name /
sc_fusion_policy_name report for every value of the header's enum (asked here
through a ctypes handle of this test's own), and the names docs/API.md fixes.
Values outside the enums are refused with SC_ERR_INVALID_ARG."""
import ctypes
import os
import sys

import sparsecoll
from sparsecoll import _comm, _fusion, consts

fails = []


def ok(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL: %s" % what)


own = ctypes.CDLL(os.environ["SPARSECOLL_LIBRARY"])


def library_names(fn_name, enum):
    fn = getattr(own, fn_name)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    out = {}
    for value in enum.values():
        name = ctypes.c_char_p()
        r = fn(value, ctypes.byref(name))
        ok(r == consts.SC_SUCCESS, "%s(%d) = %d" % (fn_name, value, r))
        out[name.value.decode()] = value
    for value in (-1, max(enum.values()) + 1, 1 << 20):
        name = ctypes.c_char_p(b"untouched")
        r = fn(value, ctypes.byref(name))
        ok(r == consts.SC_ERR_INVALID_ARG, "%s(%d) = %d, not SC_ERR_INVALID_ARG" % (fn_name, value, r))
        ok(name.value == b"untouched", "%s(%d) wrote *name" % (fn_name, value))
    r = fn(0, None)
    ok(r == consts.SC_ERR_INVALID_ARG, "%s(0, NULL) = %d" % (fn_name, r))
    return out


sparse = library_names("sc_sparse_algo_name", consts.SC_SPARSE_ALGO_T)
ok(_comm.SPARSE_ALGOS == sparse, "package sparse names %r, library %r" % (_comm.SPARSE_ALGOS, sparse))
ok(sparse == {"gtopk": consts.SC_SPARSE_GTOPK, "tree": consts.SC_SPARSE_GTOPK_TREE,
              "allgather": consts.SC_SPARSE_ALLGATHER, "hier": consts.SC_SPARSE_GTOPK_HIER,
              "hitopk": consts.SC_SPARSE_HITOPK},
   "sparse names %r" % sparse)

policies = library_names("sc_fusion_policy_name", consts.SC_FUSION_POLICY_T)
ok(_fusion.POLICIES == policies, "package policies %r, library %r" % (_fusion.POLICIES, policies))
ok(policies == {"wfbp": consts.SC_FUSE_NONE, "size": consts.SC_FUSE_SIZE, "mgwfbp": consts.SC_FUSE_MGWFBP,
                "dear": consts.SC_FUSE_DEAR, "single": consts.SC_FUSE_SINGLE, "p3": consts.SC_FUSE_P3},
   "policy names %r" % policies)

# The package resolves names (any case) and enum values through those maps,
# and refuses the others naming the valid ones.
ok(_comm._enum(_comm.SPARSE_ALGOS, "Tree", "algo") == consts.SC_SPARSE_GTOPK_TREE, "'Tree'")
ok(_comm._enum(_fusion.POLICIES, consts.SC_FUSE_P3, "policy") == consts.SC_FUSE_P3, "SC_FUSE_P3")
for table, old in ((_comm.SPARSE_ALGOS, "gtopk_tree"), (_comm.SPARSE_ALGOS, "gtopk_hier"), (_fusion.POLICIES, "none")):
    try:
        _comm._enum(table, old, "name")
        ok(False, "%r accepted" % old)
    except sparsecoll.ArgumentError as e:
        ok(all(n in str(e) for n in table), "%r refused without the names: %s" % (old, e))

if fails:
    sys.exit(1)
print("PASS: %d sparse algorithms and %d fusion policies named by the library" % (len(sparse), len(policies)))
