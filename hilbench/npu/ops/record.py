"""Little-endian op param records for the ``HBM0`` blob: scalar fields, then optionally
``u16 C``, ``i32 multiplier[C]``, ``i8 shift[C]``, zero padding to a multiple of 4. (A record
may place its channel count among its scalar fields instead: ``Record(..., count=name)``.)

Every field is range-checked on unpack, so a blob can never hand the kernel a value the
host would not have produced (see docs/model-blob.md for each op's table).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from hilbench.errors import ModelError


@dataclass(frozen=True)
class Field:
    """One scalar: ``fmt`` a struct code (i, h, H, b, B); ``choices`` makes it an enum."""

    name: str
    fmt: str
    lo: int
    hi: int
    choices: tuple[str, ...] | None = None


def enum(name: str, choices: tuple[str, ...]) -> Field:
    return Field(name, "B", 0, len(choices) - 1, choices)


#: Ranges of the per-channel tail: Q31 multipliers and shifts (> 0 is a left shift).
MULTIPLIER = (0, 2**31 - 1)
SHIFT = (-31, 30)
#: The channel count a per-channel record appends after its scalar fields.
CHANNELS = Field("n_channels", "H", 1, 65535)


class Record:
    """Packs/unpacks one op kind's params. ``count`` names the field among ``fields`` that
    holds the channel count C; None (per-channel records) appends :data:`CHANNELS`. A field
    whose range is a single value (``lo == hi``, e.g. a reserved byte) is a constant: packed
    as that value and not returned by :meth:`unpack`."""

    def __init__(
        self, kind: str, fields: list[Field], per_channel: bool, count: str | None = None
    ) -> None:
        self.kind = kind
        self.per_channel = per_channel
        self.count = count if count is not None else (CHANNELS.name if per_channel else None)
        #: every scalar field of the head in wire order, the channel count included
        self.fields = list(fields) + ([CHANNELS] if per_channel and count is None else [])
        if self.count is not None and self.count not in [f.name for f in self.fields]:
            raise ValueError(f"{kind}: count field {self.count!r} is not a field")
        self.head = struct.Struct("<" + "".join(f.fmt for f in self.fields))

    def offsets(self) -> list[tuple[Field, int]]:
        """Each head field with its byte offset in the record."""
        out, pos = [], 0
        for f in self.fields:
            out.append((f, pos))
            pos += struct.calcsize("<" + f.fmt)
        return out

    def pack(self, params: dict[str, Any]) -> bytes:
        values = []
        mult = shift = None
        if self.per_channel:
            mult = np.asarray(params["multiplier"], dtype="<i4").reshape(-1)
            shift = np.asarray(params["shift"]).reshape(-1).astype("i1")
        for f in self.fields:
            if f.name == self.count:
                values.append(mult.size)
            elif f.lo == f.hi:
                values.append(f.lo)
            else:
                v = params[f.name]
                values.append(f.choices.index(v) if f.choices else int(v))
        tail = b"" if mult is None else mult.tobytes() + shift.tobytes()
        data = self.head.pack(*values) + tail
        return data + b"\0" * (-len(data) % 4)

    def _bad(self, what: str) -> ModelError:
        return ModelError(f"{self.kind} params: {what}", "rebuild the blob with hilbench.npu.blob")

    def unpack(self, data: bytes) -> dict[str, Any]:
        if len(data) < self.head.size:
            raise self._bad(
                f"record is {len(data)} bytes, shorter than the {self.head.size}-byte header"
            )
        values = self.head.unpack_from(data, 0)
        out: dict[str, Any] = {}
        nch = 0
        for f, v in zip(self.fields, values, strict=True):
            if not f.lo <= v <= f.hi:
                raise self._bad(f"{f.name}={v} outside [{f.lo}, {f.hi}]")
            if f.name == self.count:
                nch = int(v)
            elif f.lo != f.hi:
                out[f.name] = f.choices[v] if f.choices else int(v)
        need = self.head.size + 5 * nch
        need += -need % 4
        if len(data) != need:
            raise self._bad(f"record needs {need} bytes, got {len(data)}")
        if "act_min" in out and "act_max" in out and out["act_min"] > out["act_max"]:
            raise self._bad(f"act_min {out['act_min']} > act_max {out['act_max']}")
        if self.per_channel:
            o = self.head.size
            mult = np.frombuffer(data, "<i4", nch, o).astype(np.int32)
            shift = np.frombuffer(data, "i1", nch, o + 4 * nch).astype(np.int32)
            if np.any(mult < MULTIPLIER[0]):
                raise self._bad("negative multiplier")
            if np.any(shift < SHIFT[0]) or np.any(shift > SHIFT[1]):
                raise self._bad(f"shift outside [{SHIFT[0]}, {SHIFT[1]}]")
            out["multiplier"], out["shift"] = mult, shift
        return out


# Common field sets.
I8 = (-128, 127)
INPUT_OFFSET = Field("input_offset", "i", -127, 128)
OUTPUT_OFFSET = Field("output_offset", "i", *I8)
ACT_MIN = Field("act_min", "i", *I8)
ACT_MAX = Field("act_max", "i", *I8)
