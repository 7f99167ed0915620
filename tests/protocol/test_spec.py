"""hilbench.protocol.spec: the declaration is consistent, the generic request checker follows
the processing order (length, then ranges in table order), and the message classes' own
readers accept and refuse exactly what it does, with the same code and message."""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hilbench.protocol import messages as m
from hilbench.protocol import spec
from hilbench.protocol.frames import PROTOCOL_VERSION, Frame

REQUEST_TYPES = sorted(spec.REQUEST_LAYOUTS)


# ---- a strategy of payloads: valid, a field out of range, counts that lie, mutated, random ----


@st.composite
def layout_values(draw: st.DrawFn, layout: spec.Layout, wild: bool) -> list:
    """Values of ``layout``; with ``wild``, any scalar may take any value of its wire type."""
    values: list = []
    names: dict[str, int] = {}
    counts = {it.count for it in layout.items if isinstance(it, spec.Array | spec.Records)}
    for it in layout.items:
        if isinstance(it, spec.Scalar):
            lo, hi = layout.bounds(it)
            w = spec.WIRES[it.wire]
            if it.name in counts:
                v = draw(st.integers(max(lo - 1, w.lo), min(lo + 5, w.hi)))
                if wild:
                    v = draw(st.sampled_from([v, hi, hi + 1 if hi < w.hi else hi]))
            else:
                inside = st.integers(lo, hi) | st.sampled_from([lo, hi])
                edges = st.sampled_from([w.lo, w.hi, max(lo - 1, w.lo), min(hi + 1, w.hi)])
                v = draw(inside | edges if wild else inside)
            values.append(v)
        elif isinstance(it, spec.Array):
            w = spec.WIRES[it.elem]
            n = values[names[it.count]]
            n = min(n, 600)  # a count past MAX_Q still gets (up to) a matching array
            raw = draw(st.binary(min_size=n * w.size, max_size=n * w.size))
            values.append(np.frombuffer(raw, w.dtype))
        elif isinstance(it, spec.Rest):
            values.append(draw(st.binary(max_size=24)))
        elif isinstance(it, spec.Records):
            sub = spec.LAYOUTS[it.layout]
            n = min(values[names[it.count]], 4)
            values.append([draw(layout_values(sub, wild)) for _ in range(n)])
        elif isinstance(it, spec.Embed):
            values.append(draw(layout_values(spec.LAYOUTS[it.layout], wild)))
        else:
            values.append(None)
        names[it.name] = len(values) - 1
    return values


@st.composite
def payloads(draw: st.DrawFn, t: int) -> bytes:
    layout = spec.REQUEST_LAYOUTS[t]
    kind = draw(st.sampled_from(["valid", "wild", "random", "cut", "extend", "flip"]))
    if kind == "random":
        return draw(st.binary(max_size=80))
    p = spec.pack_payload(layout, draw(layout_values(layout, kind != "valid")))
    if kind == "cut" and p:
        return p[: draw(st.integers(0, len(p) - 1))]
    if kind == "extend":
        return p + draw(st.binary(min_size=1, max_size=6))
    if kind == "flip" and p:
        b = bytearray(p)
        for _ in range(draw(st.integers(1, 3))):
            b[draw(st.integers(0, len(b) - 1))] = draw(st.integers(0, 255))
        return bytes(b)
    return p


typed_payloads = st.sampled_from(REQUEST_TYPES).flatmap(
    lambda t: st.tuples(st.just(t), payloads(t))
)


def outcome(fn):
    try:
        return ("ok", fn())
    except m.MessageError as exc:
        return (int(exc.code), str(exc))


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed_payloads)
def test_generic_checker_and_classes_agree(case) -> None:
    t, payload = case
    generic = outcome(lambda: spec.check_request(t, payload))
    own = outcome(lambda: m.REQUESTS[t].unpack(payload))
    if generic[0] == "ok":
        assert own[0] == "ok", (payload.hex(), own)
        decoded = m.decode_request(Frame(PROTOCOL_VERSION, t, 1, payload))
        assert decoded == own[1]
        assert own[1].pack() == payload == decoded.pack()
    else:
        assert own == generic, payload.hex()
        decoded = outcome(lambda: m.decode_request(Frame(PROTOCOL_VERSION, t, 1, payload)))
        assert decoded == generic


# ---- the processing order, by example ---------------------------------------------------------


def refused(t: int, payload: bytes) -> tuple[int, str]:
    with pytest.raises(m.MessageError) as e:
        m.decode_request(Frame(PROTOCOL_VERSION, t, 1, payload))
    return e.value.code, str(e.value)


def test_length_comes_before_ranges() -> None:
    probe = struct.pack("<BHIHH", 9, 0, 0, 999, 2) + b"\x00" * 7  # 4 bad ranges, 1 byte short
    code, text = refused(m.MessageType.PROBE, probe)
    assert code == m.ErrorCode.BAD_LENGTH
    assert text == (
        "PROBE request: payload is 18 bytes and ends inside field 'seeds' "
        "(needs 8 bytes at offset 11)"
    )
    code, text = refused(m.MessageType.PROBE, probe + b"\x00")
    assert (code, text) == (
        m.ErrorCode.BAD_ARGUMENT,
        "PROBE request: field 'slot' = 9 out of range 0..3",
    )


def test_records_and_embedded_fields_are_named_in_the_outer_message() -> None:
    batch = struct.pack("<H", 2) + struct.pack("<HIi", 1, 5, -3) + struct.pack("<H", 0)
    assert refused(m.MessageType.APPLY_BATCH, batch) == (
        m.ErrorCode.BAD_ARGUMENT,
        "APPLY_BATCH request: field 'steps[1].q' = 0 out of range 1..510",
    )
    assert refused(m.MessageType.APPLY_BATCH, batch[:-1])[1] == (
        "APPLY_BATCH request: payload is 13 bytes and ends inside field 'steps[1].q' "
        "(needs 2 bytes at offset 12)"
    )
    # n_steps = 0 with no records is long enough; its range is refused
    assert refused(m.MessageType.APPLY_BATCH, b"\x00\x00")[1] == (
        "APPLY_BATCH request: field 'n_steps' = 0 out of range 1..65535"
    )
    head = struct.pack("<Hi", 1, 7)
    probe = struct.pack("<BHIHHI", 1, 32, 0, 0, 1, 9)
    assert refused(m.MessageType.APPLY_PROBE, head + probe) == (
        m.ErrorCode.BAD_ARGUMENT,
        "APPLY_PROBE request: field 'eps' = 0 out of range 1..127",
    )
    bad_both = struct.pack("<H", 0) + probe  # q_apply is before eps in table order
    assert refused(m.MessageType.APPLY_PROBE, bad_both)[1].endswith(
        "'q_apply' = 0 out of range 1..510"
    )


def test_cross_field_rules() -> None:
    assert refused(m.MessageType.LOAD_MODEL, struct.pack("<II", 3, 2) + b"ab")[1] == (
        "LOAD_MODEL request: offset 2 + chunk length 2 = 4 exceeds total_len 3"
    )
    assert refused(m.MessageType.LOAD_DATA, struct.pack("<BII", 4, 0, 0))[1] == (
        "LOAD_DATA request: field 'slot' = 4 out of range 0..3"  # ranges before the rule
    )
    assert refused(m.MessageType.EVAL, struct.pack("<BII", 0, 2**32 - 1, 2))[1] == (
        "EVAL request: fields 'start' + 'count' = 4294967297 exceed 2**32"
    )
    m.decode_request(
        Frame(PROTOCOL_VERSION, m.MessageType.EVAL, 1, struct.pack("<BII", 0, 2**32 - 1, 1))
    )
    assert refused(m.MessageType.INFER, struct.pack("<BIII", 0, 3, 0, 0) + b"\x01")[1] == (
        "INFER request: an input is given, so slot and index must be 0 (got slot 0, index 3)"
    )
    ok = m.decode_request(
        Frame(PROTOCOL_VERSION, m.MessageType.INFER, 1, struct.pack("<BIII", 2, 3, 0, 0))
    )
    assert ok == m.InferRequest(2, 3) and ok.input == b""
    with pytest.raises(m.MessageError, match="slot and index must be 0"):
        m.InferRequest(1, 0, np.array([1, -2], np.int8))
    assert m.InferRequest(input=np.array([1, -2], np.int8)).pack() == b"\x00" * 13 + b"\x01\xfe"


def test_version_and_unknown_type_messages() -> None:
    assert refused(m.MessageType.HELLO, b"")[0] == m.ErrorCode.BAD_LENGTH
    with pytest.raises(m.MessageError) as e:
        m.decode_request(Frame(PROTOCOL_VERSION + 1, 1, 1, b""))
    assert (e.value.code, str(e.value)) == (
        m.ErrorCode.BAD_VERSION,
        f"device speaks protocol version {PROTOCOL_VERSION}, "
        f"frame is version {PROTOCOL_VERSION + 1}",
    )
    free = spec.LAST_REQUEST + 1  # the first free type
    assert refused(free, b"") == (m.ErrorCode.UNKNOWN_TYPE, f"unknown request type 0x{free:02x}")


# ---- the declaration ----------------------------------------------------------------------------


def test_derived_limits() -> None:
    assert spec.MAX_Q == 510 and spec.max_q(256) == 30
    assert spec.HEADER_SIZE == 6 and spec.FRAME_OVERHEAD == 10
    assert (spec.MODEL_CHUNK_OVERHEAD, spec.DATA_CHUNK_OVERHEAD, spec.DATA_HEADER_BYTES) == (
        8,
        9,
        8,
    )
    assert spec.probe_response_size(spec.MAX_Q) == 4091 <= spec.MAX_PAYLOAD
    assert spec.apply_probe_response_size(spec.MAX_Q) == 4095
    assert spec.LAYOUTS["APPLY_PROBE"].size(q_apply=spec.MAX_Q, q=spec.MAX_Q) == 4093
    assert spec.infer_response_size(spec.MAX_INFER_OUTPUT) == spec.MAX_PAYLOAD
    assert spec.LAYOUTS["PROBE_R"].offset("duration_ns", q=3) == 26
    assert spec.CAP_INFER == 1 << 6 and spec.MessageType.INFER == 0x0C
    assert spec.CAP_DEVICE_INFO == 1 << 7 and spec.CAP_LOAD_STAGE == 1 << 8
    assert spec.MessageType.LOAD_COMMIT == 0x0F
    assert spec.MessageType.HEAD_GRAD == 0x10 == spec.LAST_REQUEST and spec.CAP_HEAD_GRAD == 1 << 9
    assert spec.LAYOUTS["HEAD_GRAD"].size(n=10) == 54 and spec.LAYOUTS["HEAD_GRAD_R"].size() == 21
    ids = spec.LAYOUT_IDS
    assert [ids[spec.REQUEST_LAYOUTS[t].key] for t in REQUEST_TYPES] == [
        t - spec.FIRST_REQUEST for t in REQUEST_TYPES
    ]


def test_every_template_uses_the_c_subset_and_has_a_code() -> None:
    conv = re.compile(r"%(?:%|0?\d*[dxs])")
    for name, template in spec.MESSAGES.items():
        assert "%" not in conv.sub("", template), name
        assert name in spec.MESSAGE_CODES, name
        assert len(template.encode()) < spec.MAX_ERROR_MSG
    for rule in spec.RULES.values():
        assert rule.template in spec.MESSAGES


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ("a" * 256, 256),
        ("a" * 300, 256),
        ("é" * 200, 256),  # 2-byte characters: 128 fit exactly
        ("a" + "é" * 200, 255),  # the 128th character would straddle byte 256
        ("€" * 100, 255),  # 3-byte: 85 characters
        ("ab" + "💡" * 70, 254),  # 4-byte: 2 + 63 * 4 = 254
    ],
)
def test_format_message_cuts_on_a_character_boundary(text: str, cut: int) -> None:
    out = spec.format_message("%s", (text,))
    assert len(out.encode()) == cut and text.startswith(out)


def test_error_response_carries_the_cut_text() -> None:
    exc = m.MessageError("é" * 300, m.ErrorCode.INTERNAL)
    err = m.error_response(4, exc)
    assert len(err.message.encode()) == 256 and m.ErrorResponse.unpack(err.pack()) == err


def test_data_blob_checks_in_order() -> None:
    def text(blob: bytes) -> str:
        with pytest.raises(m.MessageError) as e:
            spec.check_data_blob(blob)
        assert e.value.code == m.ErrorCode.BAD_ARGUMENT
        return str(e.value)

    assert text(b"\x01\x00") == "data blob is 2 bytes, shorter than its 8-byte header"
    head = struct.pack("<IHH", 2, 0, 3)
    assert text(head) == "data blob: field 'item_size' = 0 out of range 1..65535"
    head = struct.pack("<IHH", 2, 3, 4)
    assert text(head + bytes(7)) == "data blob is 15 bytes, its header says 16"
    assert (
        text(head + bytes(6) + b"\x01\x04")
        == "data blob: label 4 of item 1 is not below n_classes 4"
    )
    assert spec.check_data_blob(head + bytes(6) + b"\x03\x00") == (2, 3, 4)


def test_newer_is_a_window_of_half_the_sequence_space() -> None:
    assert spec.newer(1, 0) and spec.newer(0, 0xFFFF) and spec.newer(0x7FFF, 0)
    assert not spec.newer(0, 0) and not spec.newer(0x8000, 0) and not spec.newer(5, 6)


def test_a_broken_declaration_is_refused_at_import() -> None:
    bad = spec.Layout("X", "X request", (spec.Array("a", "u8", "n"), spec.S("n", "u8")))
    spec.LAYOUTS["X"] = bad
    spec._LAYOUT_LIST_BACKUP = spec._LAYOUT_LIST  # type: ignore[attr-defined]
    try:
        spec._LAYOUT_LIST = (*spec._LAYOUT_LIST, bad)  # type: ignore[misc]
        with pytest.raises(ValueError, match="count must be an earlier unsigned"):
            spec._validate()
    finally:
        spec._LAYOUT_LIST = spec._LAYOUT_LIST_BACKUP  # type: ignore[attr-defined,misc]
        del spec.LAYOUTS["X"]
    spec._validate()
