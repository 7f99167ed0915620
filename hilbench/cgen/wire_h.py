"""device_fw/core/gen/hb_wire.h: the wire protocol (docs/protocol.md) for the C core.

Declared in :mod:`hilbench.protocol.spec`; this module only renders it: the constants, the
message templates (``HB_MSG_*``), and per layout its field ids, offset and size macros and the
static tables that ``device_fw/core/msg.c`` walks to check a request (nanopb's idea: one
generic walker over generated descriptors instead of hand-written code per message).
"""

from __future__ import annotations

from hilbench.cgen import Header, builder, c_ident, c_string
from hilbench.protocol import frames, spec

WIRE_IDS = {name: i + 1 for i, name in enumerate(spec.WIRES)}  # HB_W_U8 = 1, ...
RULE_IDS = {name: i + 1 for i, name in enumerate(spec.RULES)}  # HB_RULE_CHUNK_END = 1, ...
KINDS = {
    spec.Scalar: "HB_FK_SCALAR",
    spec.Array: "HB_FK_ARRAY",
    spec.Rest: "HB_FK_REST",
    spec.Records: "HB_FK_RECORDS",
    spec.Embed: "HB_FK_EMBED",
    spec.Rule: "HB_FK_RULE",
}
NONE = 0xFF  # "no field" / "no layout" in the tables

TABLE_FORMAT = """\
Layout tables (msg.c walks them; HB_WIRE_TABLES defined before this header instantiates them)

hb_layouts[HB_L_<KEY>] describes one payload layout: its name as messages say it ("PROBE
request") and its fields in wire order. A request of type t has layout id t - HB_FIRST_REQUEST
(HB_L_HELLO .. HB_L_LAST_REQUEST); responses, ERROR, the frame header and the data blob's
header follow.
Each hb_field_desc is one entry, in table order:
  HB_FK_SCALAR   a little-endian integer of wire type `wire` (HB_W_*); `ranged` set: its value
                 must be in lo..hi (inclusive) or the request is refused with HB_MSG_RANGE
  HB_FK_ARRAY    `count` elements of wire type `wire`; `count` is the index of an earlier scalar
                 of the same layout whose value (as read) is the element count
  HB_FK_REST     every byte left in the payload (last data field of a top-level layout)
  HB_FK_RECORDS  `count` instances of layout `sub`, back to back (APPLY_BATCH's steps); a field
                 of record i is named HB_FIELD_PATH % (field name, i, sub-field name)
  HB_FK_EMBED    one instance of layout `sub`; its fields are named as the outer layout's
  HB_FK_RULE     cross-field rule `rule` (HB_RULE_*) on the fields at indices args[0..2]
                 (a REST field's value is its length); refused with its template
Nested layouts (sub) are flat: only SCALAR, ARRAY and RULE fields, so nesting is one level.
Checking a request (docs/protocol.md "Device processing order", steps 6-7):
  1. length: walk the fields in order, reading each count as it stands; the payload ending
     inside a field gives HB_MSG_SHORT, bytes after the last field HB_MSG_TRAILING (BAD_LENGTH);
  2. ranges: walk again; every ranged scalar and every rule in table order, records in order
     (BAD_ARGUMENT with HB_MSG_RANGE or the rule's template).
Field ids: HB_F_<KEY>_<FIELD> = HB_FIELD(layout, index), for the accessors of hb_msg.h.
Offsets: HB_OFF_<KEY>_<FIELD> is a constant, or a macro of the count fields before the field
(e.g. HB_OFF_APPLY_COEFFS(q)); none is given past a RECORDS field. HB_MIN_SIZE_<KEY>: bytes with
every count 0 and no rest; HB_SIZE_<KEY>(counts...) for layouts without REST and RECORDS."""


def _key(layout: spec.Layout) -> str:
    return c_ident(layout.key)


def _c_int(v: int) -> str:
    if v > 0x7FFFFFFF:
        return f"{v}ull" if v > 0x7FFFFFFFFFFFFFFF else f"{v}ll"
    if v < -0x80000000:
        return f"({v}ll)"
    return f"({v})" if v < 0 else str(v)


def _c_bound(b: spec.Bound, default: int) -> str:
    if b is None:
        return _c_int(default)
    if isinstance(b, str):
        return f"HB_{b}"
    return _c_int(b)


def _expr(const: int, coefs: dict[str, int]) -> tuple[str, list[str]]:
    """A C expression ``const + sum(coef * count)`` and its parameters, in order."""
    params = list(coefs)
    terms = [f"{const}u"] + [f"{c}u * (uint32_t)({p})" for p, c in coefs.items()]
    return ("(" + " + ".join(terms) + ")" if params else str(const)), params


def _offsets(layout: spec.Layout) -> list[tuple[str, str, list[str]]]:
    """(field, C expression, parameters) of every field with a known offset."""
    out = []
    const, coefs = 0, {}
    for it in layout.items:
        if isinstance(it, spec.Rule):
            continue
        expr, params = _expr(const, coefs)
        out.append((it.name, expr, params))
        if isinstance(it, spec.Scalar):
            const += spec.WIRES[it.wire].size
        elif isinstance(it, spec.Array):
            coefs[it.count] = coefs.get(it.count, 0) + spec.WIRES[it.elem].size
        else:  # Rest, Records, Embed: nothing after them has an offset macro
            break
    return out


def _size(layout: spec.Layout) -> tuple[str, list[str]] | None:
    const, coefs = 0, {}
    for it in layout.items:
        if isinstance(it, spec.Scalar):
            const += spec.WIRES[it.wire].size
        elif isinstance(it, spec.Array):
            coefs[it.count] = coefs.get(it.count, 0) + spec.WIRES[it.elem].size
        elif isinstance(it, spec.Embed):
            sub = spec.LAYOUTS[it.layout]
            if any(isinstance(x, spec.Embed) for x in sub.items):
                return None
            if any(o.name == x.name for o in layout.items for x in sub.items):
                return None  # a name used on both levels: no macro
            for x in sub.items:
                if isinstance(x, spec.Scalar):
                    const += spec.WIRES[x.wire].size
                elif isinstance(x, spec.Array):
                    coefs[x.count] = coefs.get(x.count, 0) + spec.WIRES[x.elem].size
        elif isinstance(it, spec.Rest | spec.Records):
            return None
    return _expr(const, coefs)


def _macro(name: str, expr: str, params: list[str]) -> str:
    return f"#define {name}({', '.join(params)}) {expr}" if params else f"#define {name} {expr}"


def _field_row(layout: spec.Layout, it: spec.Item) -> str:
    idx = {x.name: i for i, x in enumerate(layout.items)}
    kind = KINDS[type(it)]
    wire, count, sub = "0", str(NONE), str(NONE)
    rule, args, ranged, lo, hi = "0", [NONE] * 3, "0", "0", "0"
    name = c_string(it.name)
    if isinstance(it, spec.Scalar):
        wire = f"HB_W_{it.wire.upper()}"
        if it.ranged:
            w = spec.WIRES[it.wire]
            ranged, lo, hi = "1", _c_bound(it.lo, w.lo), _c_bound(it.hi, w.hi)
    elif isinstance(it, spec.Array):
        wire, count = f"HB_W_{it.elem.upper()}", str(idx[it.count])
    elif isinstance(it, spec.Records):
        count, sub = str(idx[it.count]), f"HB_L_{c_ident(it.layout)}"
    elif isinstance(it, spec.Embed):
        sub = f"HB_L_{c_ident(it.layout)}"
    elif isinstance(it, spec.Rule):
        rule = f"HB_RULE_{c_ident(it.rule)}"
        args = [idx[a] for a in it.args] + [NONE] * (3 - len(it.args))
        name = c_string(it.rule)
    a = ", ".join(str(x) for x in args)
    return f"    {{{name}, {kind}, {wire}, {count}, {sub}, {rule}, {{{a}}}, {ranged}, {lo}, {hi}}},"


@builder("hb_wire.h")
def build() -> Header:
    h = Header("hb_wire.h", "hilbench/protocol/spec.py", includes=("<stdint.h>",))
    h.comment("Framing (docs/protocol.md, Framing)")
    h.define("HB_PROTOCOL_VERSION", spec.PROTOCOL_VERSION)
    h.define("HB_MAX_PAYLOAD", spec.MAX_PAYLOAD)
    h.define("HB_MIN_DEVICE_PAYLOAD", spec.MIN_DEVICE_PAYLOAD)
    h.define("HB_HEADER_SIZE", spec.HEADER_SIZE)
    h.define("HB_CRC_SIZE", spec.CRC_SIZE)
    h.define("HB_FRAME_OVERHEAD", spec.FRAME_OVERHEAD)
    h.define("HB_MAX_ENCODED_LEN", frames.MAX_ENCODED_LEN)
    h.define("HB_RESPONSE_BIT", spec.RESPONSE_BIT)
    h.define("HB_SEQ_WINDOW", spec.SEQ_WINDOW, "seq is newer: 1 <= (seq - last) mod 2^16 < this")
    h.comment("Kinds of discarded frames; an ERROR BAD_FRAME answer carries the kind as its text")
    for i, kind in enumerate(spec.FRAME_PROBLEMS):
        h.define(f"HB_PROBLEM_{c_ident(kind)}", i + 1)
    for kind in spec.FRAME_PROBLEMS:
        h.string(f"HB_PROBLEM_NAME_{c_ident(kind)}", kind)
    h.define("HB_N_PROBLEMS", len(spec.FRAME_PROBLEMS))
    h.comment("Message types")
    for t in spec.MessageType:
        h.define(f"HB_TYPE_{t.name}", int(t))
    h.define("HB_FIRST_REQUEST", int(spec.FIRST_REQUEST))
    h.define("HB_LAST_REQUEST", int(spec.LAST_REQUEST))
    h.comment("Error codes")
    for code in spec.ErrorCode:
        h.define(f"HB_ERR_{code.name}", int(code))
    h.comment("HELLO capability bits")
    for name, bit in spec.CAPABILITIES.items():
        h.define(f"HB_{name}", bit)
    h.comment("LOG kinds (docs/protocol.md, Device log)")
    for kind in spec.LogKind:
        h.define(f"HB_LOG_{kind.name}", int(kind))
    h.define("HB_LOG_RING", spec.LOG_RING, "lines a device holds until a session takes them")
    for name, text in spec.LOG_TEXTS.items():
        h.string(f"HB_LOG_{name}", text)
    h.comment("Timing sources")
    for src in spec.TimingSource:
        h.define(f"HB_TIMING_{c_ident(src.name)}", int(src))
    h.comment("Limits (docs/protocol.md, Message types; docs/firmware.md, Memory)")
    for name in ("N_SLOTS", "MAX_BATCH", "MAX_EPS", "MAX_STRING", "MAX_ERROR_MSG"):
        h.define(f"HB_{name}", getattr(spec, name))
    h.define("HB_MAX_Q", spec.MAX_Q, "largest q whose PROBE answer / APPLY fits MAX_PAYLOAD")
    h.define("HB_MAX_INFER_OUTPUT", spec.MAX_INFER_OUTPUT, "INFER output elements in MAX_PAYLOAD")
    done = {"N_SLOTS", "MAX_BATCH", "MAX_EPS", "MAX_STRING", "MAX_ERROR_MSG", "MAX_Q"}
    done |= {"MAX_INFER_OUTPUT", "MAX_PAYLOAD", "MIN_DEVICE_PAYLOAD"}
    for name, value in spec.LIMITS.items():  # the other names a range may use
        if name not in done:
            h.define(f"HB_{name}", int(value))
    h.define("HB_MODEL_CHUNK_OVERHEAD", spec.MODEL_CHUNK_OVERHEAD, "LOAD_MODEL bytes before chunk")
    h.define("HB_DATA_CHUNK_OVERHEAD", spec.DATA_CHUNK_OVERHEAD, "LOAD_DATA bytes before chunk")
    h.define("HB_DATA_HEADER_BYTES", spec.DATA_HEADER_BYTES, "the data blob's header")
    h.define("HB_DEFAULT_ARENA_BYTES", spec.DEFAULT_ARENA_BYTES, "the SIL's and the twin's arena")

    h.comment(
        "Message templates (hilbench.protocol.spec.MESSAGES): format with HB_FAIL(st,\n"
        "HB_MSG_<NAME>_CODE, HB_MSG_<NAME>, args...); the twin formats the same text with %."
    )
    h.string("HB_FIELD_PATH", spec.FIELD_PATH)
    for name, text in spec.MESSAGES.items():
        h.string(f"HB_MSG_{name}", text)
        h.define(f"HB_MSG_{name}_CODE", f"HB_ERR_{spec.MESSAGE_CODES[name].name}")

    h.comment(TABLE_FORMAT)
    h.raw(
        "typedef uint16_t hb_field; /* HB_FIELD(layout, index) */\n"
        "#define HB_FIELD(layout, index) ((hb_field)(((layout) << 8) | (index)))\n"
        "#define HB_FIELD_LAYOUT(f) ((uint8_t)((f) >> 8))\n"
        "#define HB_FIELD_INDEX(f) ((uint8_t)((f) & 0xFFu))"
    )
    h.lines.append("")
    for name, w in spec.WIRES.items():
        h.define(f"HB_W_{name.upper()}", WIRE_IDS[name], f"{w.size} byte(s)")
    for i, kind in enumerate(KINDS.values()):
        h.define(kind, i + 1)
    for name, rule in spec.RULES.items():
        h.define(f"HB_RULE_{c_ident(name)}", RULE_IDS[name], rule.doc)
    h.define("HB_NONE", NONE, "no field / no layout")
    h.raw(
        "\n"
        "typedef struct {\n"
        "    const char *name; /* as messages name it */\n"
        "    uint8_t kind;     /* HB_FK_* */\n"
        "    uint8_t wire;     /* SCALAR: its wire type; ARRAY: its elements' (HB_W_*) */\n"
        "    uint8_t count;    /* ARRAY, RECORDS: index of the count field; else HB_NONE */\n"
        "    uint8_t sub;      /* RECORDS, EMBED: the nested layout's id; else HB_NONE */\n"
        "    uint8_t rule;     /* RULE: HB_RULE_*; else 0 */\n"
        "    uint8_t args[3];  /* RULE: indices of its fields (HB_NONE when unused) */\n"
        "    uint8_t ranged;   /* SCALAR: 1 when lo..hi applies */\n"
        "    int64_t lo, hi;   /* inclusive range of a ranged SCALAR */\n"
        "} hb_field_desc;\n"
        "\n"
        "typedef struct {\n"
        '    const char *name; /* "PROBE request" */\n'
        "    const hb_field_desc *fields;\n"
        "    uint8_t n_fields;\n"
        "    uint8_t flat; /* only SCALAR, ARRAY and RULE fields: may be nested */\n"
        "} hb_layout_desc;"
    )
    order = sorted(spec.LAYOUTS.values(), key=lambda lay: spec.LAYOUT_IDS[lay.key])
    h.comment("Layout ids")
    for lay in order:
        h.define(f"HB_L_{_key(lay)}", spec.LAYOUT_IDS[lay.key], lay.name)
    last = spec.LAYOUT_IDS[spec.REQUEST_LAYOUTS[int(spec.LAST_REQUEST)].key]
    h.define("HB_L_LAST_REQUEST", last, "the last request's layout (msg.c checks the order)")
    h.define("HB_N_LAYOUTS", len(order))
    h.define("HB_MAX_FIELDS", max(len(lay.items) for lay in order), "fields of the longest layout")

    for lay in order:
        key = _key(lay)
        doc = f"{lay.name} (layout {key})" + (f": {lay.doc}" if lay.doc else "")
        h.comment(doc)
        for i, it in enumerate(lay.items):
            if not isinstance(it, spec.Rule):
                h.define(f"HB_F_{key}_{c_ident(it.name)}", f"HB_FIELD(HB_L_{key}, {i})")
        for name, expr, params in _offsets(lay):
            h.lines.append(_macro(f"HB_OFF_{key}_{c_ident(name)}", expr, params))
        h.define(f"HB_MIN_SIZE_{key}", lay.min_size)
        size = _size(lay)
        if size is not None:
            h.lines.append(_macro(f"HB_SIZE_{key}", *size))

    h.comment("The tables (one definition: in msg.c, which defines HB_WIRE_TABLES first)")
    h.lines.append("extern const hb_layout_desc hb_layouts[HB_N_LAYOUTS];")
    h.lines.append("#ifdef HB_WIRE_TABLES")
    for lay in order:
        if not lay.items:
            continue
        h.lines.append(f"static const hb_field_desc hb_fields_{lay.key.lower()}[] = {{")
        h.lines.extend(_field_row(lay, it) for it in lay.items)
        h.lines.append("};")
    h.lines.append("const hb_layout_desc hb_layouts[HB_N_LAYOUTS] = {")
    for lay in order:
        fields = f"hb_fields_{lay.key.lower()}" if lay.items else "0"
        h.lines.append(
            f"    {{{c_string(lay.name)}, {fields}, {len(lay.items)}, {int(lay.flat)}}},"
        )
    h.lines.append("};")
    h.lines.append("#endif /* HB_WIRE_TABLES */")
    return h
