"""Integer cross-entropy in Q16, computed identically by the twin and the firmware.

For int8 logits ``l`` (output scale ``s``) and label ``y``, with ``d_j = max(l) - l_j``:

    loss = LIN[max(l) - l_y] + ln(S / 2^16),   S = sum_j EXP[d_j]

``EXP[k] = round(2^16 exp(-s k))`` and ``LIN[k] = round(2^16 s k)`` (k = 0..255) depend on the
model's output scale; the host computes them once and sends them in the model blob (section
``LOSS``) with ``LN[i] = round(2^16 ln(1 + i/1024))`` (i = 0..1024), so the device does no
floating point. ``ln(S/2^16)`` is found by normalising S to 32 bits and interpolating LN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Q16 = 1 << 16
LN2_Q16 = 45426  # round(2^16 ln 2)
LN_BITS = 10
_LOSS_SECTION = np.dtype([("exp", "<u4", 256), ("lin", "<i4", 256), ("ln", "<i4", 1025)])


@dataclass(frozen=True)
class LossTables:
    """The three integer tables of the Q16 cross-entropy."""

    exp: np.ndarray  # uint32[256]
    lin: np.ndarray  # int32[256]
    ln: np.ndarray  # int32[1025]

    @classmethod
    def for_scale(cls, output_scale: float) -> LossTables:
        k = np.arange(256, dtype=np.float64)
        s = float(output_scale)
        i = np.arange((1 << LN_BITS) + 1, dtype=np.float64)
        return cls(
            exp=np.rint(np.exp(-s * k) * Q16).astype(np.uint32),
            lin=np.rint(s * k * Q16).astype(np.int32),
            ln=np.rint(np.log1p(i / (1 << LN_BITS)) * Q16).astype(np.int32),
        )

    def to_bytes(self) -> bytes:
        rec = np.zeros((), dtype=_LOSS_SECTION)
        rec["exp"], rec["lin"], rec["ln"] = self.exp, self.lin, self.ln
        return rec.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> LossTables:
        if len(data) != _LOSS_SECTION.itemsize:
            raise ValueError(
                f"LOSS section is {len(data)} bytes, expected {_LOSS_SECTION.itemsize}"
            )
        rec = np.frombuffer(data, dtype=_LOSS_SECTION)[0]
        exp = rec["exp"].astype(np.uint32)
        if exp[0] != Q16 or np.any(np.diff(exp.astype(np.int64)) > 0):
            raise ValueError("LOSS section: EXP[0] must be 65536 and EXP non-increasing")
        return cls(exp=exp, lin=rec["lin"].astype(np.int32), ln=rec["ln"].astype(np.int32))


def ln_q16(s: np.ndarray, tables: LossTables) -> np.ndarray:
    """``round-ish(2^16 ln(S / 2^16))`` for integers ``65536 <= S < 2^32`` (int64 result)."""
    s = np.asarray(s, dtype=np.int64)
    _, e = np.frexp(s.astype(np.float64))  # exact for S < 2^53: S in [2^(e-1), 2^e)
    b = e.astype(np.int64) - 1
    norm = s << (31 - b)  # in [2^31, 2^32)
    frac = norm - (1 << 31)
    idx = frac >> (31 - LN_BITS)
    rem = frac & ((1 << (31 - LN_BITS)) - 1)
    ln = tables.ln.astype(np.int64)
    lo, hi = ln[idx], ln[idx + 1]
    interp = ((hi - lo) * rem + (1 << (30 - LN_BITS))) >> (31 - LN_BITS)
    return (b - 16) * LN2_Q16 + lo + interp


def per_sample_q16(logits: np.ndarray, labels: np.ndarray, tables: LossTables) -> np.ndarray:
    """Q16 cross-entropy of each input; logits (..., N, C) int8, labels (N,)."""
    lg = logits.astype(np.int32)
    lmax = lg.max(axis=-1, keepdims=True)
    s = tables.exp.astype(np.int64)[lmax - lg].sum(axis=-1)
    ly = np.take_along_axis(lg, np.broadcast_to(labels[:, None], (*lg.shape[:-1], 1)), axis=-1)
    lin = tables.lin.astype(np.int64)[(lmax - ly)[..., 0]]
    return lin + ln_q16(s, tables)


def mean_q16(logits: np.ndarray, labels: np.ndarray, tables: LossTables) -> np.ndarray:
    """Mean Q16 loss over the batch axis, rounded half up (int32, shape logits.shape[:-2])."""
    total = per_sample_q16(logits, labels, tables).sum(axis=-1)
    n = logits.shape[-2]
    return ((total + n // 2) // n).astype(np.int32)


def predictions(logits: np.ndarray) -> np.ndarray:
    """Arg-max class (the lowest index among ties), as the device computes it."""
    return np.argmax(logits, axis=-1)
