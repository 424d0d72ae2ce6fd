#!/usr/bin/python3
"""Fits the polynomial coefficients of core/cpu/math.h's float erf/erfc (offline; not part of the
build). Weighted minimax (Lawson's algorithm) on relative error, references from mpmath.

  /usr/bin/python3 tools/fit_math_f32.py

Prints the coefficients (lowest degree first) and their float32 Horner error in ulps.
"""
import math

import mpmath
import numpy as np

mpmath.mp.dps = 30


def lawson(f, x, basis, scale, iters=60):
    A = basis(x)
    w = np.ones_like(x)
    for _ in range(iters):
        W = np.sqrt(w) / scale
        c, *_ = np.linalg.lstsq(A * W[:, None], f * W, rcond=None)
        e = np.abs(A @ c - f) / scale
        w = w * e
        w /= w.sum()
    return c, (np.abs(A @ c - f) / scale).max()


def horner32(c, x):
    r = np.full_like(x, np.float32(c[-1]), dtype=np.float32)
    for v in reversed(c[:-1]):
        r = (r * x + np.float32(v)).astype(np.float32)
    return r


def ulps(got, ref):
    return (np.abs(got - ref) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)).max()


# erf(u) / u = P(u^2) on (0, 0.75]
u = np.cos(np.linspace(0, np.pi, 4000)) * 0.375 + 0.375
u = u[u > 1e-6]
f = np.array([math.erf(v) / v for v in u])
c, err = lawson(f, u, lambda x: np.vander(x * x, 6, increasing=True), np.abs(f))
u32 = u.astype(np.float32)
ref = np.array([float(mpmath.erf(float(v))) for v in u32])
print("erf_small_ratio", ", ".join("%.9ef" % v for v in c))
print("  fit 2^%.1f, float32 erf %.2f ulp" % (math.log2(err), ulps(u32 * horner32(c, u32 * u32), ref)))

# erfc(u) exp(u^2) = R(t), t = 1 / (1 + u / 2), on [0.75, 10]
u = np.linspace(0.75, 10, 6000)
f = np.array([float(mpmath.erfc(v) * mpmath.exp(v * v)) for v in u])
t = 1 / (1 + 0.5 * u)
c, err = lawson(f, t, lambda x: np.vander(x, 10, increasing=True), np.abs(f))
u32 = u.astype(np.float32)
t32 = (np.float32(1) / (np.float32(1) + np.float32(0.5) * u32)).astype(np.float32)
ref = np.array([float(mpmath.erfc(float(v)) * mpmath.exp(float(v) ** 2)) for v in u32])
print("erfc_scaled", ", ".join("%.9ef" % v for v in c))
print("  fit 2^%.1f, float32 R %.2f ulp" % (math.log2(err), ulps(horner32(c, t32), ref)))

# erfc(u) exp(u^2) / 2 = R(t), u = a / sqrt 2, t = 1 / (1 + u / 2), on a in [0, 14.15] (the
# normal tail of gelu and its gradient, one formula for every |x|); 12 coefficients
a = np.concatenate([np.linspace(0, 1, 3000), np.linspace(1, 14.15, 8000)]).astype(np.float32)
a = a.astype(np.float64)
f = np.array([float(0.5 * mpmath.erfc(v / mpmath.sqrt(2)) * mpmath.exp(v * v / 2)) for v in a])
k = 0.35355339059327376
c, err = lawson(f, 1 / (1 + k * a), lambda x: np.vander(x, 12, increasing=True), np.abs(f))
t32 = (np.float32(1) / (np.float32(1) + np.float32(k) * a.astype(np.float32))).astype(np.float32)
print("normal_tail R", ", ".join("%.9ef" % v for v in c))
print("  fit 2^%.1f, float32 R %.2f ulp" % (math.log2(err), ulps(horner32(c, t32), f)))

# The same R on the fast domain of gelu, a in [0, 5] (Note [Gelu fast domain]): 8 coefficients in
# u = t - t0 = (1 - t0 - t0 k a) / (1 + k a), one division as before; centring t keeps the
# Horner terms below R where R is small (large a), so that float rounding stays near 3.7 ulp
# (9 coefficients gave 2^-27.4 and 2.4 ulp; 8 keep gelu within 5 ulp and save an FMA).
a = np.linspace(0, 5, 6000).astype(np.float32).astype(np.float64)
f = np.array([float(0.5 * mpmath.erfc(v / mpmath.sqrt(2)) * mpmath.exp(v * v / 2)) for v in a])
t0 = 0.5
c, err = lawson(f, (1 - t0 - t0 * k * a) / (1 + k * a), lambda x: np.vander(x, 8, increasing=True),
                np.abs(f), iters=200)
a32 = a.astype(np.float32)
num = (np.float64(np.float32(-t0 * k)) * a32 + np.float64(np.float32(1 - t0))).astype(np.float32)  # fma
u32 = (num / (np.float32(1) + np.float32(k) * a32)).astype(np.float32)
print("gelu_fast R: t0 %.9ef, -t0 k %.9ef, 1 - t0 %.9ef" % (t0, np.float32(-t0 * k), np.float32(1 - t0)))
print("  ", ", ".join("%.9ef" % v for v in c))
print("  fit 2^%.1f, float32 R %.2f ulp" % (math.log2(err), ulps(horner32(c, u32), f)))
