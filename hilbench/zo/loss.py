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
EXP_SIZE = 256  # EXP and LIN: one entry per logit difference 0..255
LN_SIZE = (1 << LN_BITS) + 1
SECTION_TAG = "LOSS"
_LOSS_SECTION = np.dtype(
    [("exp", "<u4", EXP_SIZE), ("lin", "<i4", EXP_SIZE), ("ln", "<i4", LN_SIZE)]
)
SECTION_BYTES = _LOSS_SECTION.itemsize  # 6148

#: The refusals of a LOSS section a device sends (BAD_MODEL), in the order it checks them.
#: Python %-templates (%d only); the C firmware formats the same texts (gen/hb_zo.h).
MESSAGES = {
    "missing": "model blob has no LOSS section",
    "size": "LOSS section is %d bytes, expected %d",
    "exp0": "LOSS section: EXP[0] is %d, must be %d",
    "exp_rising": "LOSS section: EXP[%d] = %d > EXP[%d] = %d, EXP must be non-increasing",
}


class LossError(ValueError):
    """A LOSS section a device refuses; the text is ``MESSAGES[key] % args``."""

    def __init__(self, key: str, *args: int) -> None:
        self.key = key
        self.message = MESSAGES[key] % args
        super().__init__(self.message)


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
        """The tables of a LOSS section, checked as a device checks them (LossError)."""
        if len(data) != SECTION_BYTES:
            raise LossError("size", len(data), SECTION_BYTES)
        rec = np.frombuffer(data, dtype=_LOSS_SECTION)[0]
        exp = rec["exp"].astype(np.uint32)
        if exp[0] != Q16:
            raise LossError("exp0", int(exp[0]), Q16)
        rising = np.flatnonzero(np.diff(exp.astype(np.int64)) > 0)
        if rising.size:
            k = int(rising[0])
            raise LossError("exp_rising", k + 1, int(exp[k + 1]), k, int(exp[k]))
        return cls(exp=exp, lin=rec["lin"].astype(np.int32), ln=rec["ln"].astype(np.int32))

    @classmethod
    def from_sections(cls, sections: dict[str, bytes]) -> LossTables:
        """The tables of a model blob's sections (LossError if there is no LOSS section)."""
        if SECTION_TAG not in sections:
            raise LossError("missing")
        return cls.from_bytes(sections[SECTION_TAG])


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
    """Mean Q16 loss over the batch axis, rounded half up: ``(sum + N div 2) div N`` with
    floor division in int64, then wrapped to int32 (two's complement, as ``astype`` does; a
    LOSS section with sane tables never gets near the wrap). Shape logits.shape[:-2]."""
    total = per_sample_q16(logits, labels, tables).sum(axis=-1)
    n = logits.shape[-2]
    return ((total + n // 2) // n).astype(np.int32)


def predictions(logits: np.ndarray) -> np.ndarray:
    """Arg-max class (the lowest index among ties), as the device computes it."""
    return np.argmax(logits, axis=-1)
