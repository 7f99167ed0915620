"""device_fw/core/gen/hb_blob.h: the HBM0 model blob (docs/model-blob.md) for the C core.

Declared in hilbench.npu.blob (layout of the fixed records), hilbench.npu.ops (opcodes, each
op's param RECORD with its field ranges) and hilbench.device.blobcheck (device limits, the
inputs each op takes, the refusal templates) and hilbench.device.plan; this module only
renders them.
"""

from __future__ import annotations

from hilbench.cgen import Header, builder, c_ident
from hilbench.device import blob as blobcheck
from hilbench.device import plan
from hilbench.npu import blob
from hilbench.npu import registry as _ops
from hilbench.npu.ops import common as _common
from hilbench.npu.ops import record as R
from hilbench.npu.quant import ACTIVATIONS

#: struct code -> the C field type of the generated tables (hb_blob.h HB_FMT_*)
FMT_NAMES = {"B": "U8", "b": "I8", "H": "U16", "h": "I16", "I": "U32", "i": "I32"}


def _layout(h: Header, prefix: str, fields: tuple[tuple[str, str], ...]) -> None:
    offsets = blob.field_offsets(fields)
    size = blob._struct(fields).size
    h.define(f"{prefix}_SIZE", size)
    for name, off in offsets.items():
        h.define(f"{prefix}_{c_ident(name)}_OFF", off)


def _int(v: int) -> str:
    return f"({v})" if v < 0 else str(v)


@builder("hb_blob.h")
def build() -> Header:
    h = Header("hb_blob.h", "hilbench/npu/blob.py, npu/ops RECORDs, device/blobcheck.py")
    h.comment("Format (docs/model-blob.md, Conventions and Layout)")
    h.string("HB_BLOB_MAGIC", blob.MAGIC.decode("ascii"))
    for i, b in enumerate(blob.MAGIC):
        h.define(f"HB_BLOB_MAGIC_{i}", b)
    h.define("HB_BLOB_VERSION", blob.VERSION)
    h.define("HB_BLOB_ALIGN", blob.ALIGN)
    h.define("HB_BLOB_CRC_SIZE", blob.CRC_SIZE)
    _layout(h, "HB_BLOB_HEADER", blob.HEADER_FIELDS)
    _layout(h, "HB_BLOB_TENSOR", blob.TENSOR_FIELDS)
    _layout(h, "HB_BLOB_OP", blob.OP_FIELDS)
    _layout(h, "HB_BLOB_SECTION", blob.SECTION_FIELDS)
    h.comment("Tensors")
    for name, code in blob.DTYPE_CODES.items():
        h.define(f"HB_DTYPE_{c_ident(name)}", code)
        h.define(f"HB_DTYPE_{c_ident(name)}_SIZE", blob.ITEMSIZE[name])
    h.define("HB_TENSOR_FLAG_HAS_DATA", blob.FLAG_HAS_DATA)
    h.define("HB_MAX_RANK", blob.MAX_RANK)
    h.define("HB_MAX_ELEMENTS", blob.MAX_ELEMENTS)
    h.comment("Device limits (docs/firmware.md, Device limits)")
    h.define("HB_MAX_TENSORS", blobcheck.MAX_TENSORS)
    h.define("HB_MAX_OPS", blobcheck.MAX_OPS)
    h.define("HB_MAX_SECTIONS", blobcheck.MAX_SECTIONS)
    h.define("HB_MAX_ACT_BYTES", blobcheck.MAX_ACT_BYTES)
    h.define("HB_ACT_ALIGN", plan.ALIGN, "activation buffers start at multiples of this")

    h.comment(
        "Opcodes. HB_OPS(X) lists X(KIND, opcode, name, fewest inputs, most inputs, outputs)."
    )
    defs = sorted(_ops.REGISTRY.values(), key=lambda d: d.opcode)
    for d in defs:
        h.define(f"HB_OP_{c_ident(d.kind)}", d.opcode)
    h.define("HB_OP_MAX_CODE", max(d.opcode for d in defs))
    h.define("HB_OP_MAX_INPUTS", max(a[1] for a in blobcheck.ARITY.values()))
    h.define("HB_OP_MAX_OUTPUTS", max(a[2] for a in blobcheck.ARITY.values()))
    rows = []
    for d in defs:
        lo, hi, n_out = blobcheck.ARITY[d.kind]
        rows.append(f'X({c_ident(d.kind)}, {d.opcode}, "{d.kind}", {lo}, {hi}, {n_out})')
    h.raw("#define HB_OPS(X) \\\n    " + " \\\n    ".join(rows))

    h.comment("Enum fields of the records")
    for i, p in enumerate(_common.PADDINGS):
        h.define(f"HB_PADDING_{p}", i)
    for i, a in enumerate(ACTIVATIONS):
        h.define(f"HB_ACTIVATION_{a}", i)

    h.comment(
        "Op param records (docs/model-blob.md; declared as RECORD in hilbench/npu/ops/<op>.py).\n"
        "HB_REC_<KIND>_FIELDS(X) lists X(KIND, FIELD, name, offset, HB_FMT_*, lowest, highest)\n"
        "in wire order; per-channel records then hold i32 multiplier[C] and i8 shift[C] after\n"
        "the head, C being the field at HB_REC_<KIND>_CHANNEL_COUNT_OFF."
    )
    for code, name in FMT_NAMES.items():
        h.define(f"HB_FMT_{name}", list(FMT_NAMES).index(code))
    h.define("HB_REC_MULTIPLIER_MIN", R.MULTIPLIER[0])
    h.define("HB_REC_MULTIPLIER_MAX", R.MULTIPLIER[1])
    h.define("HB_REC_SHIFT_MIN", R.SHIFT[0])
    h.define("HB_REC_SHIFT_MAX", R.SHIFT[1])
    for d in defs:
        rec = blobcheck.RECORDS[d.kind]
        k = c_ident(d.kind)
        h.lines.append("")
        h.define(f"HB_REC_{k}_HEAD_SIZE", rec.head.size)
        h.define(f"HB_REC_{k}_PER_CHANNEL", int(rec.per_channel))
        rows = []
        for f, off in rec.offsets():
            fk = c_ident(f.name)
            h.define(f"HB_REC_{k}_{fk}_OFF", off)
            rows.append(
                f'X({k}, {fk}, "{f.name}", {off}, HB_FMT_{FMT_NAMES[f.fmt]}, '
                f"{_int(f.lo)}, {_int(f.hi)})"
            )
        offsets = {f.name: o for f, o in rec.offsets()}
        h.define(
            f"HB_REC_{k}_CHANNEL_COUNT_OFF",
            offsets[rec.count] if rec.per_channel else -1,
            "the field holding C (-1: no per-channel tail)",
        )
        if rows:
            h.raw(f"#define HB_REC_{k}_FIELDS(X) \\\n    " + " \\\n    ".join(rows))
        else:
            h.raw(f"#define HB_REC_{k}_FIELDS(X) /* no fields */")

    h.comment(
        "Refusals (BAD_MODEL), in the order a device checks them (hilbench.device.blobcheck\n"
        "MESSAGES); HB_WHAT_HBM_* name the part of the blob a truncation or padding is in."
    )
    for key, text in blobcheck.MESSAGES.items():
        h.string(f"HB_MSG_HBM_{c_ident(key)}", text)
    for key, text in blobcheck.WHAT.items():
        h.string(f"HB_WHAT_HBM_{c_ident(key)}", text)
    names = [line.split()[1] for line in h.lines if line.startswith("#define ")]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"hb_blob.h would define {twice} twice: rename a field or a key")
    return h
