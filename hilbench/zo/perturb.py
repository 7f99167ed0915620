"""Perturbation directions regenerated on both sides of the wire (spec: docs/zo-math.md).

Every distribution yields, per seed and trainable tensor, *raw samples* ``r`` (small signed
integers) from PRNG words, then a per-(seed, tensor) scale ``S`` (Q16) turns them into the
*unit direction* ``u = rsym(r * S, 8)`` (Q8: 256 is one unit) and the probe adds the integer
perturbation ``delta = rsym(eps * M * u, 12) << U`` (``M`` the tensor's or channel's eps
multiplier in Q4, ``U`` its unit shift) in stored LSBs.

- ``rademacher``: one bit per element, r = +1 (bit set) or -1; ``S = 2^16``.
- ``gaussian``: r = popcount(16 bits) - 8, a centred Binomial(16, 1/2): integer-valued,
  variance exactly 4, range [-8, 8] (4 sigma); two elements per word; ``S = 2^15``.
- ``uniform`` (PeZO): r = 2 * (byte & 0x7F) - 127, odd values in [-127, 127]; four elements per
  word. Fixed scaling ``S = 887`` (1 / sigma, sigma = sqrt((128^2 - 1) / 3)), or PeZO's
  *adaptive* scaling: ``S = min(2^16, isqrt(floor(2^32 n / sum r^2)))``, which gives every
  tensor's perturbation the same root mean square (one unit) whatever was drawn.

A *pool* (PeZO's random-number reuse) holds P raw samples generated once per run from a pool
seed; a perturbation then reads element ``i`` of row ``j`` of a tensor from
``pool[(o_j + i) mod P]``, with a fresh offset ``o_j = (h_j * P) >> 16`` per row from half-word
``j`` of the seed's stream, so rows never repeat at a fixed distance.

*Rows* are a tensor's output channels (docs/zo-math.md, "Rows"): ``ROWS_LEADING`` -- axis 0,
row ``j`` is the contiguous elements ``j*L .. j*L+L-1`` (FULLY_CONNECTED and CONV_2D filters;
biases, whose rows are their single elements) -- or ``ROWS_TRAILING`` -- the last axis, row
``j`` is elements ``j, j+R, j+2R, ...`` (DEPTHWISE_CONV_2D filters ``[1, KH, KW, C*D]``). The
pool's offsets and the per-row eps multipliers use the same rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hilbench.zo.rng import (
    STREAM_PERTURB,
    STREAM_POOL,
    stream_words,
    stream_words_many,
    stream_words_tensors,
)

RADEMACHER, GAUSSIAN, UNIFORM = 0, 1, 2
DISTRIBUTIONS = {"rademacher": RADEMACHER, "gaussian": GAUSSIAN, "uniform": UNIFORM}
DISTRIBUTION_NAMES = {v: k for k, v in DISTRIBUTIONS.items()}
FIXED, ADAPTIVE = 0, 1
SCALINGS = {"fixed": FIXED, "adaptive": ADAPTIVE}

ELEMENTS_PER_WORD = {RADEMACHER: 32, GAUSSIAN: 2, UNIFORM: 4}
SCALE_FRAC = 16  # S is Q16
UNIT_FRAC = 8  # u is Q8
MULT_FRAC = 4  # eps multipliers are Q4 (16 = 1.0)
DELTA_SHIFT = UNIT_FRAC + MULT_FRAC  # 12
ONE_UNIT = 1 << UNIT_FRAC
UNIFORM_SIGMA = math.sqrt((128**2 - 1) / 3)
FIXED_SCALE = {RADEMACHER: 1 << 16, GAUSSIAN: 1 << 15, UNIFORM: round(65536 / UNIFORM_SIGMA)}
SCALE_MAX = 1 << 16
MAX_POOL = 1 << 16
ROWS_LEADING, ROWS_TRAILING = 0, 1  # row layouts: axis 0 (contiguous rows) or the last axis

_BITS = np.arange(32, dtype=np.uint32)
_POPCOUNT16 = np.array([bin(i).count("1") for i in range(1 << 16)], dtype=np.int8)


# --- raw samples ------------------------------------------------------------------------------
def words_needed(n_elements: int, distribution: int = RADEMACHER) -> int:
    """Fresh 32-bit PRNG words one direction of ``n_elements`` raw samples draws."""
    per = ELEMENTS_PER_WORD[distribution]
    return (n_elements + per - 1) // per


def samples_from_words(words: np.ndarray, distribution: int, n: int) -> np.ndarray:
    """Raw samples (int8) from PRNG words ``(..., n_words)``: the first ``n`` of each row."""
    w = np.asarray(words, dtype=np.uint32)
    lead = w.shape[:-1]
    if distribution == RADEMACHER:
        bits = (w[..., None] >> _BITS) & np.uint32(1)
        r = bits.reshape((*lead, -1)).astype(np.int8) * np.int8(2) - np.int8(1)
    elif distribution == GAUSSIAN:
        halves = np.stack([w & np.uint32(0xFFFF), w >> np.uint32(16)], axis=-1)
        r = _POPCOUNT16[halves.reshape((*lead, -1))] - np.int8(8)
    elif distribution == UNIFORM:
        b = w.astype("<u4").view(np.uint8).reshape((*lead, -1)) & np.uint8(0x7F)
        r = (b.astype(np.int16) * 2 - 127).astype(np.int8)
    else:
        raise ValueError(f"unknown distribution {distribution}")
    return np.ascontiguousarray(r[..., :n])


def rademacher(seed: int, tensor: int, n_elements: int) -> np.ndarray:
    """The +1/-1 direction for one tensor (int8, flat)."""
    words = stream_words(seed, STREAM_PERTURB, tensor, words_needed(n_elements))
    return samples_from_words(words, RADEMACHER, n_elements)


def directions(seeds: np.ndarray, tensor: int, shape: tuple[int, ...]) -> np.ndarray:
    """Stacked Rademacher directions ``(len(seeds), *shape)`` for one tensor (v0 API)."""
    return draw(seeds, tensor, shape, RADEMACHER)


@dataclass(frozen=True)
class Pool:
    """PeZO's reuse pool: P raw samples of one distribution, generated once per run."""

    values: np.ndarray  # int8 (P,)
    seed: int
    distribution: int

    @classmethod
    def generate(cls, seed: int, size: int, distribution: int) -> Pool:
        if not 1 <= size <= MAX_POOL:
            raise ValueError(f"pool size {size} outside 1..{MAX_POOL}")
        words = stream_words(seed, STREAM_POOL, 0, words_needed(size, distribution))
        return cls(samples_from_words(words, distribution, size), seed, distribution)

    @property
    def size(self) -> int:
        return int(self.values.size)


def rows_of(shape: tuple[int, ...], layout: int = ROWS_LEADING) -> tuple[int, int]:
    """(rows R, row length L) of a tensor: ``shape[0]`` rows (ROWS_LEADING; a rank-1 bias has
    one row per element) or ``shape[-1]`` rows (ROWS_TRAILING, depthwise filters)."""
    n = math.prod(shape)
    rows = shape[-1] if layout == ROWS_TRAILING else shape[0]
    return rows, n // rows


def row_mults(mult: int | np.ndarray, shape: tuple[int, ...], layout: int) -> int | np.ndarray:
    """A tensor's Q4 eps multiplier(s), broadcastable to ``shape``: a scalar stays a scalar; one
    multiplier per row becomes an int64 array along the rows' axis (axis 0 or the last)."""
    m = np.asarray(mult, dtype=np.int64)
    if m.ndim == 0:
        return int(m)
    if m.size != rows_of(shape, layout)[0]:
        raise ValueError(f"{m.size} row multipliers for shape {shape} (layout {layout})")
    if layout == ROWS_TRAILING:
        return m.reshape((1,) * (len(shape) - 1) + (-1,))
    return m.reshape((-1,) + (1,) * (len(shape) - 1))


def pool_offsets(seeds: np.ndarray, tensor: int, rows: int, pool_size: int) -> np.ndarray:
    """Per-row pool offsets ``(len(seeds), rows)``: half-word j -> ``(h_j * P) >> 16``."""
    words = stream_words_many(seeds, STREAM_PERTURB, tensor, (rows + 1) // 2)
    return _offsets_from_words(words, rows, pool_size)


def _offsets_from_words(words: np.ndarray, rows: int, pool_size: int) -> np.ndarray:
    halves = np.stack([words & np.uint32(0xFFFF), words >> np.uint32(16)], axis=-1)
    h = halves.reshape(len(words), -1)[:, :rows].astype(np.int64)
    return (h * pool_size) >> 16


def draw(
    seeds: np.ndarray,
    tensor: int,
    shape: tuple[int, ...],
    distribution: int,
    pool: Pool | None = None,
    layout: int = ROWS_LEADING,
) -> np.ndarray:
    """Raw samples ``(len(seeds), *shape)`` int8 for one tensor, fresh or from the pool."""
    return draw_all(seeds, [shape], distribution, pool, first_tensor=tensor, layouts=[layout])[0]


def draw_all(
    seeds: np.ndarray,
    shapes: list[tuple[int, ...]],
    distribution: int,
    pool: Pool | None = None,
    *,
    first_tensor: int = 0,
    layouts: list[int] | None = None,
) -> list[np.ndarray]:
    """``draw`` for tensors ``first_tensor, first_tensor + 1, ...`` of ``shapes`` (row
    ``layouts``, default all ROWS_LEADING), with one PRNG call for all of them (the same
    numbers as tensor-by-tensor)."""
    seeds = np.asarray(seeds, dtype=np.uint32).reshape(-1)
    k = len(seeds)
    if layouts is None:
        layouts = [ROWS_LEADING] * len(shapes)
    if pool is None:
        sizes = [
            (first_tensor + i, words_needed(math.prod(sh), distribution))
            for i, sh in enumerate(shapes)
        ]
        words = stream_words_tensors(seeds, STREAM_PERTURB, sizes)
        return [
            samples_from_words(w, distribution, math.prod(sh)).reshape((k, *sh))
            for w, sh in zip(words, shapes, strict=True)
        ]
    sizes = [
        (first_tensor + i, (rows_of(sh, lay)[0] + 1) // 2)
        for i, (sh, lay) in enumerate(zip(shapes, layouts, strict=True))
    ]
    words = stream_words_tensors(seeds, STREAM_PERTURB, sizes)
    out = []
    for w, sh, lay in zip(words, shapes, layouts, strict=True):
        rows, length = rows_of(sh, lay)
        off = _offsets_from_words(w, rows, pool.size)
        idx = (off[:, :, None] + np.arange(length, dtype=np.int64)) % pool.size  # (k, R, L)
        if lay == ROWS_TRAILING:  # element i*R + j is entry i of row j
            idx = idx.transpose(0, 2, 1)
        out.append(pool.values[idx].reshape((k, *sh)))
    return out


def fresh_words(
    shape: tuple[int, ...], distribution: int, pool_size: int = 0, layout: int = ROWS_LEADING
) -> int:
    """PRNG words one perturbation of a tensor draws (the pool itself is drawn once per run)."""
    if pool_size:
        rows, _ = rows_of(shape, layout)
        return (rows + 1) // 2
    return words_needed(math.prod(shape), distribution)


def fresh_numbers(shape: tuple[int, ...], pool_size: int = 0, layout: int = ROWS_LEADING) -> int:
    """Random numbers one perturbation of a tensor draws: one per element, or one per row."""
    return rows_of(shape, layout)[0] if pool_size else math.prod(shape)


# --- scales, unit directions and deltas --------------------------------------------------------
def isqrt_u64(x: np.ndarray) -> np.ndarray:
    """floor(sqrt(x)) for 0 <= x < 2^63, exactly (what the firmware's bitwise isqrt gives)."""
    x = np.asarray(x, dtype=np.int64).astype(np.uint64)
    r = np.floor(np.sqrt(x.astype(np.float64))).astype(np.uint64)
    r = np.where(r * r > x, r - np.uint64(1), r)
    r1 = r + np.uint64(1)
    r = np.where(r1 * r1 <= x, r1, r)
    return r.astype(np.int64)


def scales(r: np.ndarray, distribution: int, scaling: int) -> np.ndarray:
    """Per-seed scale S (Q16, int64) of stacked raw samples ``r`` (k, *shape)."""
    k = r.shape[0]
    if scaling == FIXED:
        return np.full(k, FIXED_SCALE[distribution], dtype=np.int64)
    flat = r.reshape(k, -1).astype(np.int64)
    n = flat.shape[1]
    q = np.einsum("ki,ki->k", flat, flat)
    safe = np.maximum(q, 1)
    s = isqrt_u64((np.int64(n) << 32) // safe)  # both positive: floor = truncation
    s = np.where(q == 0, SCALE_MAX, s)
    return np.minimum(s, SCALE_MAX)  # Q <= 127^2 n keeps S >= 516: no lower clamp


def rshr(x: np.ndarray, shift: int) -> np.ndarray:
    """Round half up then arithmetic shift right: ``(x + 2^(shift-1)) >> shift``."""
    x = np.asarray(x, dtype=np.int64)
    return (x + (1 << (shift - 1))) >> shift if shift > 0 else x


def rsym(x: np.ndarray, shift: int) -> np.ndarray:
    """Round half away from zero, symmetric: ``sign(x) * ((|x| + 2^(shift-1)) >> shift)``."""
    x = np.asarray(x, dtype=np.int64)
    mag = (np.abs(x) + (1 << (shift - 1))) >> shift
    return np.where(x < 0, -mag, mag)


def units(r: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Unit directions ``u = rsym(r * S, 8)`` (Q8, |u| <= 32512) for stacked ``r`` (k, ...)."""
    s = np.asarray(s, dtype=np.int64).reshape((-1,) + (1,) * (r.ndim - 1))
    return rsym(r.astype(np.int64) * s, SCALE_FRAC - UNIT_FRAC).astype(np.int32)


def deltas(u: np.ndarray, eps: int, mult: np.ndarray | int, unit_shift: int) -> np.ndarray:
    """Integer perturbation in stored LSBs: ``rsym(eps * M * u, 12) << U`` (int64) for stacked
    units ``u`` (k, *shape).

    ``mult`` is the Q4 multiplier: a scalar, or an array broadcastable to the tensor's shape
    (one per row: :func:`row_mults`)."""
    m = np.asarray(mult, dtype=np.int64)
    d = rsym(np.int64(eps) * m * u.astype(np.int64), DELTA_SHIFT)
    return d << unit_shift
