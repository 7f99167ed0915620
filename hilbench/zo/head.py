"""The hybrid's exact head: an integer gradient of the last FULLY_CONNECTED layer, identical on
host and device (spec: docs/zo-math.md section 11; the wire: HEAD_GRAD in docs/protocol.md).

For each item of the batch, with the head's int8 input ``x`` (K values, input offset ``o``),
its int8 logits ``l`` (M values) and the label ``y``, from the unperturbed forward pass::

    E_j = EXP[max(l) - l_j]    S = sum_j E_j            (the LOSS section's table, u32)
    p_j = (E_j * 2^15 + S div 2) div S                  (softmax, Q15, 0..32768)
    e_j = p_j - 2^15 [j = y]                            (dL/dz_j, Q15)
    G_ji += e_j * (x_i + o)      B_j += e_j             (int32: |G| <= 256 * 2^15 * 255 < 2^31)

then, with the host's per-channel rates ``r_j`` (i32, Q24: ``2^24 lr s_in s_w,j / N``), the
bias gain ``g`` (0..24) and 16-bit rounding halves ``h`` of stream (round_seed, 3), tensor
``HEAD_TENSOR`` (element e: weight j*K + i, then bias M*K + j)::

    w_ji = clamp(w_ji - ((G_ji r_j + (h_e << 23)) >> 39), -127, 127)
    b_j  = clamp(b_j - ((B_j r_j + R_e) >> (39 - g)), -2^30, 2^30)   R_e = h_e scaled to 2^(39-g)

A straight-through gradient: a logit clamped by the requantization is differentiated as if it
were not. The head has no master: its int8 weights move by stochastic rounding (an update of
0.3 LSB moves a weight with probability 0.3).
"""

from __future__ import annotations

import zlib

import numpy as np

from hilbench.zo.loss import LossTables
from hilbench.zo.rng import STREAM_ROUNDING, stream_words
from hilbench.zo.zocf import BIAS_UNIT_SHIFT

GRAD_FRAC = 15  # softmax probabilities and e_j in Q15
RATE_FRAC = 24  # the per-channel rates in Q24
SHIFT = GRAD_FRAC + RATE_FRAC  # 39
MAX_BIAS_GAIN = 24  # the bias shift 39 - g stays >= 15
#: the host's bias gain g: a bias moves as ZO moves one of unit shift U = 8 (2U bits of rate)
BIAS_GAIN = 2 * BIAS_UNIT_SHIFT
HEAD_TENSOR = 255  # the rounding stream's tensor (no ZOCF entry has it: MAX_TRAINED = 128)
WEIGHT_LIMIT = 127
BIAS_LIMIT = 1 << 30
INT32_MAX = (1 << 31) - 1


def softmax_error(logits: np.ndarray, labels: np.ndarray, tables: LossTables) -> np.ndarray:
    """``e = p - onehot(y)`` in Q15 (int64, (N, M)) from int8 logits (N, M)."""
    lg = logits.astype(np.int64)
    d = lg.max(axis=1, keepdims=True) - lg
    e = tables.exp.astype(np.int64)[d]
    s = e.sum(axis=1, keepdims=True)
    p = (e * (1 << GRAD_FRAC) + s // 2) // s
    p[np.arange(len(labels)), labels] -= 1 << GRAD_FRAC
    return p


def gradient(
    x: np.ndarray, logits: np.ndarray, labels: np.ndarray, input_offset: int, tables: LossTables
) -> tuple[np.ndarray, np.ndarray]:
    """(G int32 (M, K), B int32 (M,)): the batch's summed integer gradients of the head's
    weights and biases, for its int8 inputs x (N, K) and logits (N, M)."""
    e = softmax_error(logits, labels, tables)
    xo = x.astype(np.int64) + int(input_offset)
    g = e.T @ xo  # exact in int64; fits int32 for N <= 256
    return g.astype(np.int32), e.sum(axis=0).astype(np.int32)


def rounding_halves(round_seed: int, n: int) -> np.ndarray:
    """The 16-bit halves h_0..h_{n-1} of stream (round_seed, 3), tensor HEAD_TENSOR (int64)."""
    words = stream_words(round_seed, STREAM_ROUNDING, HEAD_TENSOR, (n + 1) // 2)
    h = np.stack([words & np.uint32(0xFFFF), words >> np.uint32(16)], axis=-1).reshape(-1)[:n]
    return h.astype(np.int64)


def _offset(h: np.ndarray, shift: int) -> np.ndarray:
    return h >> (16 - shift) if shift <= 16 else h << (shift - 16)


def update(
    w: np.ndarray,
    b: np.ndarray | None,
    g: np.ndarray,
    bsum: np.ndarray,
    rates: np.ndarray,
    bias_gain: int,
    round_seed: int,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The head's weights (int8 (M, K)) and biases (int32 (M,) or None) after the update."""
    m, k = w.shape
    r = np.asarray(rates, dtype=np.int64)
    h = rounding_halves(round_seed, m * k + m)
    step = (g.astype(np.int64) * r[:, None] + _offset(h[: m * k], SHIFT).reshape(m, k)) >> SHIFT
    w2 = np.clip(w.astype(np.int64) - step, -WEIGHT_LIMIT, WEIGHT_LIMIT).astype(np.int8)
    if b is None:
        return w2, None
    s = SHIFT - bias_gain
    bstep = (bsum.astype(np.int64) * r + _offset(h[m * k :], s)) >> s
    b2 = np.clip(b.astype(np.int64) - bstep, -BIAS_LIMIT, BIAS_LIMIT).astype(np.int32)
    return w2, b2


def rates(lr: float, input_scale: float, weight_scales: np.ndarray, batch: int) -> np.ndarray:
    """The host's Q24 rates ``round(2^24 lr s_in s_w,j / N)`` (int32, clipped)."""
    s = np.asarray(weight_scales, dtype=np.float64).reshape(-1)
    r = np.rint(float(1 << RATE_FRAC) * lr * float(input_scale) * s / batch)
    return np.clip(r, -INT32_MAX, INT32_MAX).astype(np.int32)


def scales(graph) -> tuple[float, np.ndarray]:
    """(s_in, s_w per output channel (float64, (M,))) of the graph's last op, the head: the
    numbers the host's rates come from (read from the blob's graph on both the run's and the
    replay's side, so both compute the same rates)."""
    op = graph.ops[-1]
    w = graph.tensors[op.inputs[1]]
    m = int(w.shape[0])
    s = np.asarray(w.qparams.scale, dtype=np.float64).reshape(-1)
    return float(graph.tensors[op.inputs[0]].qparams.scale[0]), np.broadcast_to(s, (m,)).copy()


def accumulator_bytes(m: int, k: int) -> int:
    """Bytes of int32 accumulators HEAD_GRAD needs in the arena's free memory: M*K + M."""
    return 4 * (m * k + m)


def crc(w: np.ndarray, b: np.ndarray | None) -> int:
    """CRC-32 of the head: its int8 weights, then its int32 biases little-endian."""
    c = zlib.crc32(np.ascontiguousarray(w, dtype=np.int8).tobytes())
    if b is not None:
        c = zlib.crc32(np.ascontiguousarray(b, dtype="<i4").tobytes(), c)
    return c
