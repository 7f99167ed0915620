"""How a step's q projected gradients become APPLY's coefficients (docs/zo-math.md section 8).

The device's update is always ``m -= sum_k c_k u_k M`` (update.py); the aggregator only
decides the coefficients ``c_k``, so every aggregator runs on the device's existing APPLY, bit
for bit, on the emulator, the SIL and a board alike.

- ``mean`` (the default): ``c_k = round(2^16 lr g_k / q)``, the average of the q estimates
  ``g_k v_k`` (update.coefficients).
- ``align`` (least squares over the q directions; ZO-Align's projection, arXiv 2509.15552):
  the step that moves along the *projection of the gradient onto the span of the q
  directions*, ``V (V^T V)^-1 V^T grad``, where ``V^T grad`` is what the probe measured
  (``g``). With the Gram matrix ``G = V^T V`` of the directions ``v_k = u_k M`` (exact integers,
  regenerated from the seeds as the device does) normalised to a unit mean diagonal,
  ``Gn = G q / trace(G)``::

      a   = Gn^-1 g                   (a q x q Cholesky solve, IEEE double, fixed order)
      c_k = round(2^16 lr a_k)         clamped to +-(2^24 - 1)

  At q = 1, ``Gn = [1]`` and ``c`` is ``mean``'s exactly. For q > 1 the coefficients are *not*
  divided by q: the rate is per query, so a step of q queries moves about q times as far as
  the mean of q (``Gn ~ I`` when the dimension d >> q; the exact projection takes out the
  directions' overlaps, which the mean counts twice). At a fixed rate ``align`` therefore
  makes the same progress per forward pass at every q (the q-invariant step); ``mean`` at rate
  ``lr * q`` is ``align`` at ``lr`` up to the overlap correction.

The Cholesky is written out in Python floats (no LAPACK), so the coefficients, and with them
a run's weights, are the same bytes on every host.
"""

from __future__ import annotations

import math

import numpy as np

from hilbench.zo import perturb
from hilbench.zo.update import COEFF_LIMIT, FRAC_BITS

MEAN, ALIGN = "mean", "align"
AGGREGATORS = (MEAN, ALIGN)
_INT64_SAFE = 1 << 62


def gram(units: list[np.ndarray], mults: list[int | np.ndarray]) -> np.ndarray:
    """``G[j, k] = sum over every trained element of v_j v_k``, ``v = u * M`` (Q8 units times
    the Q4 eps multipliers, so one Rademacher unit at M = 1.0 is 4,096): (q, q) int64, exact.
    ``units``: each trained tensor's stacked unit directions (q, *shape); ``mults``: each
    tensor's multiplier, a scalar or broadcastable per row (perturb.row_mults)."""
    q = units[0].shape[0]
    g = np.zeros((q, q), dtype=np.int64)
    for u, m in zip(units, mults, strict=True):
        v = (u.astype(np.int64) * np.asarray(m, dtype=np.int64)).reshape(q, -1)
        peak = int(np.abs(v).max(initial=0))
        if peak * peak * v.shape[1] >= _INT64_SAFE:  # cannot overflow int64 below this
            raise ValueError(
                f"a Gram entry of {v.shape[1]} elements of up to {peak} may overflow int64"
            )
        g += v @ v.T
    return g


def solve_spd(a: list[list[float]], b: list[float]) -> list[float]:
    """``a^-1 b`` for a symmetric positive (semi)definite ``a``, by Cholesky in plain floats,
    in a fixed order. A pivot that is not positive (directions linearly dependent: q > d, or
    a repeated seed) is replaced by a ridge of 1e-9 of the diagonal's mean, which gives the
    least-norm solution's limit."""
    n = len(b)
    ridge = 1e-9 * sum(a[i][i] for i in range(n)) / n if n else 0.0
    low = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            s = a[i][j]
            for k in range(j):
                s -= low[i][k] * low[j][k]
            if i == j:
                low[i][i] = math.sqrt(s) if s > ridge else math.sqrt(ridge)
            else:
                low[i][j] = s / low[j][j]
    y = [0.0] * n
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= low[i][k] * y[k]
        y[i] = s / low[i][i]
    x = [0.0] * n
    for i in reversed(range(n)):
        s = y[i]
        for k in range(i + 1, n):
            s -= low[k][i] * x[k]
        x[i] = s / low[i][i]
    return x


def align_coefficients(grads: list[float], g: np.ndarray, lr: float) -> list[int]:
    """``c = round(2^16 lr Gn^-1 grads)``, ``Gn = G q / trace(G)``, clamped like ``mean``'s."""
    q = len(grads)
    if q == 1:  # Gn = [1]: exactly the mean's coefficient (round(lr * g * 2^16 / 1))
        a = list(grads)
    else:
        diag = sum(int(g[i, i]) for i in range(q)) / q
        gn = [[int(g[i, j]) / diag for j in range(q)] for i in range(q)]
        a = solve_spd(gn, list(grads))
    unit = float(1 << FRAC_BITS)
    return [min(COEFF_LIMIT, max(-COEFF_LIMIT, round(lr * x * unit))) for x in a]


class Directions:
    """Regenerates a step's unit directions from its seeds, as the device does (the twin's
    perturb code): what the host needs for ``gram``. ``zo`` a ZoConfig, ``trained`` its
    resolved Trainables (zocf.resolve), in PRNG tensor order."""

    def __init__(self, zo, trained) -> None:
        self.dist, self.scaling = zo.dist_code, zo.scaling_code
        self.pool = (
            perturb.Pool.generate(zo.pool_seed, zo.pool_size, zo.dist_code)
            if zo.pool_size
            else None
        )
        self.shapes = [t.shape for t in trained]
        self.layouts = [t.layout for t in trained]
        self.mults = [t.eps_mult for t in trained]  # scalars or per row, broadcastable

    def units(self, seeds: np.ndarray) -> list[np.ndarray]:
        seeds = np.asarray(seeds, dtype=np.uint32)
        raws = perturb.draw_all(seeds, self.shapes, self.dist, self.pool, layouts=self.layouts)
        return [perturb.units(r, perturb.scales(r, self.dist, self.scaling)) for r in raws]

    def gram(self, seeds: np.ndarray) -> np.ndarray:
        return gram(self.units(seeds), self.mults)
