"""Little-endian op param records for the ``HBM0`` blob: scalar fields, then optionally
``u16 C``, ``i32 multiplier[C]``, ``i8 shift[C]``, zero padding to a multiple of 4.

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


class Record:
    """Packs/unpacks one op kind's params."""

    def __init__(self, kind: str, fields: list[Field], per_channel: bool) -> None:
        self.kind = kind
        self.fields = fields
        self.per_channel = per_channel
        self.head = struct.Struct(
            "<" + "".join(f.fmt for f in fields) + ("H" if per_channel else "")
        )

    def pack(self, params: dict[str, Any]) -> bytes:
        values = []
        for f in self.fields:
            v = params[f.name]
            values.append(f.choices.index(v) if f.choices else int(v))
        tail = b""
        if self.per_channel:
            mult = np.asarray(params["multiplier"], dtype="<i4").reshape(-1)
            shift = np.asarray(params["shift"]).reshape(-1).astype("i1")
            values.append(mult.size)
            tail = mult.tobytes() + shift.tobytes()
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
        for f, v in zip(self.fields, values, strict=False):
            if not f.lo <= v <= f.hi:
                raise self._bad(f"{f.name}={v} outside [{f.lo}, {f.hi}]")
            out[f.name] = f.choices[v] if f.choices else int(v)
        need = self.head.size
        if self.per_channel:
            nch = values[-1]
            need += 5 * nch
            if nch == 0:
                raise self._bad("0 channels")
        need += -need % 4
        if len(data) != need:
            raise self._bad(f"record needs {need} bytes, got {len(data)}")
        if "act_min" in out and "act_max" in out and out["act_min"] > out["act_max"]:
            raise self._bad(f"act_min {out['act_min']} > act_max {out['act_max']}")
        if self.per_channel:
            o = self.head.size
            mult = np.frombuffer(data, "<i4", nch, o).astype(np.int32)
            shift = np.frombuffer(data, "i1", nch, o + 4 * nch).astype(np.int32)
            if np.any(mult < 0):
                raise self._bad("negative multiplier")
            if np.any(shift < -31) or np.any(shift > 30):
                raise self._bad("shift outside [-31, 30]")
            out["multiplier"], out["shift"] = mult, shift
        return out


# Common field sets.
I8 = (-128, 127)
INPUT_OFFSET = Field("input_offset", "i", -127, 128)
OUTPUT_OFFSET = Field("output_offset", "i", *I8)
ACT_MIN = Field("act_min", "i", *I8)
ACT_MAX = Field("act_max", "i", *I8)
