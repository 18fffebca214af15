# SPDX-License-Identifier: BSD-3-Clause
"""What the low-rank tests' numpy references share (lowrank_steps.py,
ddp_lowrank_ref.py): the library's seeded first factor and an orthonormal
basis with a fixed sign, written from the algorithm, not from the library."""
import numpy as np

MASK = (1 << 64) - 1


def splitmix64(s):
    s = (s + 0x9E3779B97F4A7C15) & MASK
    z = s
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return s, z ^ (z >> 31)


def seed_normals(n, seed, dt=np.float32):
    """The library's first factor: n standard normals from seed (splitmix64,
    Box-Muller), rounded to dt."""
    out = np.zeros(n)
    s = seed
    for x in range(0, n, 2):
        s, a = splitmix64(s)
        s, b = splitmix64(s)
        u1 = ((a >> 11) + 1) * 2.0**-53
        u2 = (b >> 11) * 2.0**-53
        rad, th = np.sqrt(-2.0 * np.log(u1)), 6.283185307179586 * u2
        out[x] = rad * np.cos(th)
        if x + 1 < n:
            out[x + 1] = rad * np.sin(th)
    return out.astype(dt).astype(np.float64)


def orth(a):
    q, r = np.linalg.qr(a)
    d = np.sign(np.diag(r))
    d[d == 0] = 1
    return q * d
