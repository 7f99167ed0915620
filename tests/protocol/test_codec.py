"""The generic codec (hilbench.protocol.codec) and its generated fast paths (fast.py).

Every declared message, built from random valid field values drawn from its layout, packs to
the bytes the declaration's own writer (``spec.pack_payload``) gives for the same values and
comes back equal; an out-of-range value is refused naming the field; the fast paths give the
generic codec's bytes and messages, and refuse (None) whatever it refuses.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hilbench.protocol import fast, spec
from hilbench.protocol import messages as m
from hilbench.protocol.codec import Codec
from hilbench.protocol.frames import PROTOCOL_VERSION, Frame, FrameDecoder

CLASSES = sorted({*m.REQUESTS.values(), *m.RESPONSES.values()}, key=lambda c: c.TYPE)
FAST = [c for c in CLASSES if c._codec.fast_unpack is not None]


def _counts(layout: spec.Layout) -> dict[str, str]:
    """array or records field -> its count field."""
    return {it.name: it.count for it in layout.items if isinstance(it, spec.Array | spec.Records)}


@st.composite
def wire_values(draw: st.DrawFn, cls: type[m.Message]) -> tuple[list, dict]:
    """(layout values, constructor keywords) of one valid message of ``cls``, drawn from its
    layout: every scalar in its declared range, every count in range with arrays that long."""
    codec: Codec = cls._codec
    layout = codec.layout
    values: list = []
    kwargs: dict = {}
    by_name: dict[str, int] = {}
    for kind, i, attr, extra in codec.entries:
        it = layout.items[i]
        if kind in ("int", "count"):
            lo, hi = layout.bounds(it)  # type: ignore[arg-type]
            if kind == "count":
                hi = min(hi, 12)
            v = draw(st.sampled_from([lo, hi]) | st.integers(lo, hi))
            if kind == "count" and extra[1]:  # a text's length: drawn with the text
                v = None
            values.append(v)
            if attr is not None and v is not None and draw(st.booleans()):
                kwargs[attr] = v  # a count the caller gives: it must match
            elif kind == "int":
                kwargs[attr] = v
        elif kind == "text":
            count = layout.items[by_name[it.count]]  # type: ignore[union-attr]
            limit = layout.bounds(count)[1]  # type: ignore[arg-type]
            text = draw(st.text(max_size=limit // 4) | st.just("é" * (limit // 2)))
            values[by_name[it.count]] = len(text.encode())  # type: ignore[union-attr]
            values.append(text.encode())
            kwargs[attr] = text
        elif kind == "array":
            n = values[by_name[it.count]]  # type: ignore[union-attr]
            raw = draw(st.binary(min_size=n * extra.itemsize, max_size=n * extra.itemsize))
            a = np.frombuffer(raw, extra).copy()
            values.append(a)
            kwargs[attr] = a if draw(st.booleans()) else a.tolist()
        elif kind == "rest":
            b = draw(st.binary(max_size=40))
            values.append(b)
            kwargs[attr] = b
        elif kind == "embed":
            sub_values, sub_kwargs = draw(wire_values(extra))
            values.append(sub_values)
            kwargs[attr] = extra(**sub_kwargs)
        elif kind == "records":
            count = by_name[_counts(layout)[it.name]]
            values[count] = n = min(values[count], 3)
            drawn = [draw(wire_values(extra)) for _ in range(n)]
            values.append([v for v, _ in drawn])
            kwargs[attr] = tuple(extra(**k) for _, k in drawn)
        else:
            values.append(None)
        by_name[it.name] = len(values) - 1
    return values, kwargs


# what a class check or a rule may refuse in a draw of declared ranges
REFUSED = ("exceeds total_len", "exceed 2**32", "slot and index must be 0", "while not complete")


def build(cls: type[m.Message], kwargs: dict) -> m.Message:
    """The message; a draw that a rule or a class check refuses (a chunk past total_len,
    ``correct`` above ``count``, ...) is rejected, any other refusal fails the test."""
    try:
        return cls(**kwargs)
    except m.MessageError as exc:
        text = str(exc)
        assume(
            not (
                any(r in text for r in REFUSED) or text.startswith("EVAL response: field 'correct'")
            )
        )
        raise


classes = st.sampled_from(CLASSES)
drawn_messages = classes.flatmap(lambda c: st.tuples(st.just(c), wire_values(c)))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn_messages, st.integers(0, 0xFFFF))
def test_every_declared_message_round_trips(case, seq: int) -> None:
    cls, (values, kwargs) = case
    msg = build(cls, kwargs)
    payload = msg.pack()
    assert payload == spec.pack_payload(cls.LAYOUT, values)  # the layout, written generically
    assert payload == msg._codec.generic_pack(msg)
    back = cls.unpack(payload)
    assert back == msg and type(back) is cls
    assert back._codec.generic_unpack(payload) == msg
    (frame,) = FrameDecoder().feed(msg.encode(seq))
    decode = m.decode_request if cls.TYPE in m.REQUESTS else m.decode_response
    assert decode(frame) == msg


def _ranged(cls: type[m.Message]) -> list[tuple[str, str, int, int]]:
    """(kind, field, lo, hi) of every scalar with a range narrower than its wire type."""
    out = []
    layout = cls.LAYOUT
    for kind, i, _, extra in cls._codec.entries:
        it = layout.items[i]
        if kind in ("int", "count") and not (kind == "count" and extra[1]):
            lo, hi = layout.bounds(it)  # type: ignore[arg-type]
            w = spec.WIRES[it.wire]  # type: ignore[union-attr]
            if (lo, hi) != (w.lo, w.hi):
                out.append((kind, it.name, lo, hi))
    return out


RANGED = [(cls, r) for cls in CLASSES for r in _ranged(cls)]


@pytest.mark.parametrize(("cls", "ranged"), RANGED, ids=[f"{c.__name__}.{r[1]}" for c, r in RANGED])
# A rule or class check (INFER's inline input needs slot 0 and index 0) rejects many draws of
# the rest of the message, by design: build() assumes them away.
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_an_out_of_range_value_is_refused_naming_the_field(cls, ranged, data) -> None:
    kind, name, lo, hi = ranged
    values, kwargs = data.draw(wire_values(cls))
    build(cls, kwargs)  # valid as drawn
    bad = data.draw(st.sampled_from([v for v in (lo - 1, hi + 1) if 0 <= v < 2**16]))
    expected = f"{cls.NAME}: field '{name}' = {bad} out of range {lo}..{hi}"
    layout = cls.LAYOUT
    wire = list(values)
    wire[layout.index(name)] = bad
    counted = [it for it in layout.items if getattr(it, "count", None) == name]
    for it in counted:  # the arrays (records) follow their count: only the range is wrong
        attr = it.name
        if isinstance(it, spec.Records):
            assume(bad == 0)
            wire[layout.index(attr)], kwargs[attr] = [], ()
        else:
            wire[layout.index(attr)] = kwargs[attr] = np.zeros(bad, spec.WIRES[it.elem].dtype)
    if kind == "int":
        kwargs[name] = bad
    else:
        kwargs.pop(name, None)
    with pytest.raises(m.MessageError) as e:
        cls(**kwargs)
    assert (e.value.code, str(e.value)) == (m.ErrorCode.BAD_ARGUMENT, expected)
    with pytest.raises(m.MessageError) as e:  # on the wire: refused when read
        cls.unpack(spec.pack_payload(layout, wire))
    assert (e.value.code, str(e.value)) == (m.ErrorCode.BAD_ARGUMENT, expected)


def test_the_range_texts_callers_see() -> None:
    with pytest.raises(m.MessageError) as e:
        m.ProbeRequest(0, 1, 0, 1, [])
    assert str(e.value) == "PROBE request: field 'q' = 0 out of range 1..510"
    with pytest.raises(m.MessageError) as e:
        m.ApplyProbeRequest([], m.ProbeRequest(0, 1, 0, 1, [1]))
    assert str(e.value) == "APPLY_PROBE request: field 'q_apply' = 0 out of range 1..510"
    with pytest.raises(m.MessageError) as e:
        m.ApplyBatchRequest(())
    assert str(e.value) == "APPLY_BATCH request: field 'n_steps' = 0 out of range 1..65535"
    with pytest.raises(m.MessageError) as e:
        m.ProbeResponse([1], [1], 0, 4)
    assert str(e.value) == "PROBE response: field 'timing_source' = 4 out of range 0..3"
    with pytest.raises(m.MessageError) as e:
        m.ApplyRequest([1, 2], [1])
    assert str(e.value) == "APPLY request: fields 'seeds' (2) and 'coeffs' (1) differ in length"
    with pytest.raises(m.MessageError) as e:
        m.InferResponse(np.zeros(2, np.int8), 0, 0, 2, n=3)
    assert str(e.value) == "INFER response: field 'n' = 3 but 'output' has 2 values"
    with pytest.raises(m.MessageError, match="'probe' must be a PROBE response"):
        m.ApplyProbeResponse(1, m.ProbeRequest(0, 1, 0, 1, [1]))
    with pytest.raises(m.MessageError, match="steps must be APPLY requests"):
        m.ApplyBatchRequest((m.ProbeRequest(0, 1, 0, 1, [1]),))
    assert m.ErrorResponse(999, 1).code == 999 and m.ErrorResponse(5, 1).code is m.ErrorCode(5)
    assert m.LoadModelResponse(1, 1, 2).complete is True


# ---- the fast paths ---------------------------------------------------------------------------


@st.composite
def payload_variants(draw: st.DrawFn, cls: type[m.Message]) -> bytes:
    """A valid payload of ``cls``, or one cut, extended, mutated or with a wild count."""
    values, _ = draw(wire_values(cls))
    kind = draw(st.sampled_from(["valid", "wild", "cut", "extend", "flip", "random"]))
    if kind == "wild":  # one scalar (an embedded one too) at an edge of its range or type
        scalars = list(_scalars(cls.LAYOUT, values))
        at, i, it, layout = draw(st.sampled_from(scalars))
        lo, hi = layout.bounds(it)
        w = spec.WIRES[it.wire]
        at[i] = draw(st.sampled_from([w.lo, w.hi, max(lo - 1, w.lo), min(hi + 1, w.hi)]))
    p = spec.pack_payload(cls.LAYOUT, values)
    if kind == "cut" and p:
        return p[: draw(st.integers(0, len(p) - 1))]
    if kind == "extend":
        return p + draw(st.binary(min_size=1, max_size=9))
    if kind == "flip" and p:
        b = bytearray(p)
        for _ in range(draw(st.integers(1, 3))):
            b[draw(st.integers(0, min(len(b) - 1, 16)))] = draw(st.integers(0, 255))
        return bytes(b)
    if kind == "random":
        return draw(st.binary(max_size=60))
    return p


def _scalars(layout: spec.Layout, values: list):
    """(values list, index, scalar, layout) of every scalar, embedded layouts' included."""
    for i, it in enumerate(layout.items):
        if isinstance(it, spec.Scalar):
            yield values, i, it, layout
        elif isinstance(it, spec.Embed):
            yield from _scalars(spec.LAYOUTS[it.layout], values[i])


def outcome(fn):
    try:
        return ("ok", fn())
    except m.MessageError as exc:
        return (int(exc.code), str(exc))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FAST).flatmap(lambda c: st.tuples(st.just(c), payload_variants(c))))
def test_the_fast_decoders_agree_with_the_generic_one(case) -> None:
    cls, payload = case
    codec = cls._codec
    generic = outcome(lambda: codec.generic_unpack(payload))
    fast = codec.fast_unpack(payload)
    if generic[0] == "ok":
        assert fast is not None and fast == generic[1], payload.hex()
        assert codec.fast_pack(fast) == codec.generic_pack(fast) == payload
        assert [type(getattr(fast, f.name)) for f in dataclasses.fields(fast)] == [
            type(getattr(generic[1], f.name)) for f in dataclasses.fields(fast)
        ]
    else:
        assert fast is None, payload.hex()
    if cls.TYPE in m.REQUESTS:  # decode_request tries the fast path, then the device's walk
        frame = Frame(PROTOCOL_VERSION, cls.TYPE, 1, payload)
        assert outcome(lambda: m.decode_request(frame)) == outcome(
            lambda: spec.check_request(cls.TYPE, payload) and codec.generic_unpack(payload)
        )


def _flat(msg: m.Message) -> dict:
    """A message's values by name, its embedded messages' in with them, arrays as lists."""
    out: dict = {}
    for f in dataclasses.fields(msg):
        v = getattr(msg, f.name)
        if isinstance(v, m.Message):
            out.update(_flat(v))
        else:
            out[f.name] = v.tolist() if isinstance(v, np.ndarray) else v
    return out


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FAST).flatmap(lambda c: st.tuples(st.just(c), payload_variants(c))))
def test_the_flat_decoders_agree_with_the_generic_one(case) -> None:
    """``fast.decoder(codec, lists=True)``: the generic codec's values, flat, arrays as lists
    of Python ints; None for whatever the generic codec refuses."""
    cls, payload = case
    codec = cls._codec
    flat = fast.decoder(codec, lists=True)
    generic = outcome(lambda: codec.generic_unpack(payload))
    got = flat(payload)
    if generic[0] == "ok":
        assert got is not None, payload.hex()
        assert type(got).__name__ == f"{cls.__name__}Values"
        assert type(got)._fields == fast.flat_fields(codec)
        assert got._asdict() == _flat(generic[1]), payload.hex()
        for v in got:
            if isinstance(v, list):
                assert all(type(x) is int for x in v)
    else:
        assert got is None, payload.hex()


def test_the_fast_paths_cover_the_per_step_messages() -> None:
    assert {c.LAYOUT.key for c in FAST} == {
        "PROBE",
        "PROBE_R",
        "APPLY_PROBED",
        "APPLY_PROBE",
        "APPLY_PROBE_R",
    }
    assert "S" in m.probe_payload.__source__ and "def probe_payload(" in m.probe_payload.__source__


@settings(max_examples=300, deadline=None)
@given(
    coeffs=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=0, max_size=12),
    slot=st.integers(-1, 5),
    batch_size=st.integers(0, 300),
    batch_seed=st.integers(-1, 2**32),
    eps=st.integers(0, 130),
    seeds=st.lists(st.integers(0, 2**32 - 1), min_size=0, max_size=12),
)
def test_apply_probe_payload_matches_the_message(
    coeffs, slot, batch_size, batch_seed, eps, seeds
) -> None:
    c, s = np.array(coeffs, np.int32), np.array(seeds, np.uint32)
    fast = m.apply_probe_payload(c, slot, batch_size, batch_seed, eps, s)
    try:
        packed = m.ApplyProbeRequest(c, m.ProbeRequest(slot, batch_size, batch_seed, eps, s))
    except m.MessageError:
        assert fast is None
    else:
        assert fast == packed.pack() == packed._codec.generic_pack(packed)


# ---- a layout no class binds, a class that does not match its layout --------------------------


def test_a_layout_without_a_class_gets_a_generated_one() -> None:
    layout = spec.Layout(
        "PING",
        "PING request",
        (
            spec.S("slot", "u8", 0, "LAST_SLOT"),
            spec.S("n", "u16", 1, 8),
            spec.Array("data", "i32", "n"),
            spec.Rest("tail"),
        ),
        0x40,
    )
    try:
        cls = m.generated_class(layout)
        assert cls.__name__ == "PingRequest" and cls.NAME == "PING request" and cls.TYPE == 0x40
        assert "``u8 slot, u16 n, i32 data[n], u8 tail[rest]``" in cls.__doc__
        msg = cls(slot=2, data=[-1, 7], tail=b"xy")
        assert msg.pack() == b"\x02\x02\x00" + np.array([-1, 7], "<i4").tobytes() + b"xy"
        assert cls.unpack(msg.pack()) == msg
        with pytest.raises(
            m.MessageError, match=r"^PING request: field 'n' = 9 out of range 1\.\.8"
        ):
            cls(slot=0, data=list(range(9)), tail=b"")
        with pytest.raises(m.MessageError, match=r"field 'slot' = 4 out of range 0\.\.3"):
            cls.unpack(b"\x04\x01\x00" + bytes(4))
        assert m.class_name(spec.LAYOUTS["APPLY_PROBE_R"]) == "ApplyProbeResponse"
    finally:
        m._CLASSES.pop("PING", None)


def test_a_class_that_does_not_match_its_layout_is_refused() -> None:
    with pytest.raises(TypeError, match=r"has no attribute for APPLY request\.coeffs"):

        @m.message("APPLY")
        class OnlySeeds(m.Message):
            seeds: np.ndarray

    with pytest.raises(TypeError, match=r"Extra\.spare is not a field of APPLY response"):

        @m.message("APPLY_R")
        class Extra(m.Message):
            updates_applied: int
            spare: int = 0

    assert m._CLASSES["APPLY"] is m.ApplyRequest and m._CLASSES["APPLY_R"] is m.ApplyResponse
