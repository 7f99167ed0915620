"""Message layer: layouts, round trips, strict unpacking, registries."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hilbench.protocol import messages as m
from hilbench.protocol import spec
from hilbench.protocol.frames import MAX_PAYLOAD, PROTOCOL_VERSION, Frame, FrameDecoder

u32 = st.integers(0, 2**32 - 1)
u16 = st.integers(0, 2**16 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
slots = st.integers(0, m.N_SLOTS - 1)
texts = st.text(max_size=16).filter(lambda s: len(s.encode()) <= m.MAX_STRING)
qs = st.one_of(st.integers(1, 8), st.sampled_from([m.MAX_Q]))
timing = st.sampled_from(list(m.TimingSource))


def arrays(dtype: str, elements: st.SearchStrategy[int], n: int) -> st.SearchStrategy:
    return st.lists(elements, min_size=n, max_size=n).map(lambda v: np.array(v, dtype=dtype))


@st.composite
def probe_requests(draw: st.DrawFn) -> m.ProbeRequest:
    q = draw(qs)
    return m.ProbeRequest(
        slot=draw(slots),
        batch_size=draw(st.integers(1, m.MAX_BATCH)),
        batch_seed=draw(u32),
        eps=draw(st.integers(1, m.MAX_EPS)),
        seeds=draw(arrays("<u4", u32, q)),
    )


@st.composite
def probe_responses(draw: st.DrawFn) -> m.ProbeResponse:
    q = draw(qs)
    return m.ProbeResponse(
        loss_plus=draw(arrays("<i4", i32, q)),
        loss_minus=draw(arrays("<i4", i32, q)),
        duration_ns=draw(st.integers(0, 2**64 - 1)),
        timing_source=draw(timing),
    )


@st.composite
def apply_requests(draw: st.DrawFn) -> m.ApplyRequest:
    q = draw(qs)
    return m.ApplyRequest(seeds=draw(arrays("<u4", u32, q)), coeffs=draw(arrays("<i4", i32, q)))


@st.composite
def chunks(draw: st.DrawFn, cls: type, fixed: int) -> m.Message:
    chunk = draw(st.binary(max_size=64) | st.sampled_from([b"\x00" * (MAX_PAYLOAD - fixed)]))
    offset = draw(st.integers(0, 2**32 - 1 - len(chunk)))
    total = draw(st.integers(max(offset + len(chunk), 1), 2**32 - 1))
    kw = {"slot": draw(slots)} if cls is m.LoadDataRequest else {}
    return cls(total_len=total, offset=offset, chunk=chunk, **kw)


@st.composite
def eval_responses(draw: st.DrawFn) -> m.EvalResponse:
    count = draw(u32)
    return m.EvalResponse(
        count=count,
        correct=draw(st.integers(0, count)),
        loss_sum_q16=draw(st.integers(-(2**63), 2**63 - 1)),
        duration_ns=draw(st.integers(0, 2**64 - 1)),
        timing_source=draw(timing),
    )


@st.composite
def eval_requests(draw: st.DrawFn) -> m.EvalRequest:
    start = draw(u32)
    return m.EvalRequest(
        slot=draw(slots), start=start, count=draw(st.integers(1, min(2**32 - 1, 2**32 - start)))
    )


def _done(complete: bool, value: int) -> int:
    return value if complete else 0


messages = st.one_of(
    st.builds(m.HelloRequest, u16),
    st.builds(
        m.HelloResponse,
        protocol_version=u16,
        max_payload=st.integers(m.MIN_DEVICE_PAYLOAD, MAX_PAYLOAD),
        boot_nonce=u32,
        capabilities=u32,
        device_id=texts,
        firmware=texts | st.just("é" * 32),
    ),
    chunks(m.LoadModelRequest, 8),
    st.builds(lambda r, c, crc: m.LoadModelResponse(r, c, _done(c, crc)), u32, st.booleans(), u32),
    chunks(m.LoadDataRequest, 9),
    st.builds(
        lambda s, r, c, n: m.LoadDataResponse(s, r, c, _done(c, n)), slots, u32, st.booleans(), u32
    ),
    probe_requests(),
    probe_responses(),
    apply_requests(),
    st.builds(m.ApplyResponse, u32),
    eval_requests(),
    eval_responses(),
    st.just(m.WeightsCrcRequest()),
    st.builds(m.WeightsCrcResponse, u32, u32),
    st.builds(m.InferRequest, slots, u32, out_offset=u32),
    st.builds(m.InferRequest, input=st.binary(max_size=64), in_offset=u32, out_offset=u32),
    st.builds(
        m.InferResponse,
        st.lists(st.integers(-128, 127), min_size=1, max_size=50).map(lambda v: np.array(v, "i1")),
        st.integers(0, 2**64 - 1),
        timing,
        st.integers(1, 2**32 - 1),
    ),
    st.just(m.DeviceInfoRequest()),
    st.builds(
        m.DeviceInfoResponse,
        *([u32] * 3),
        st.integers(0, 2**64 - 1),
        *([u32] * 10),
        st.integers(0, 2**64 - 1),
        u32,
        timing,
    ),
    st.builds(m.LoadStageRequest, st.integers(0, spec.STAGE_MODEL), st.integers(1, 2**32 - 1)),
    st.builds(m.LoadStageResponse, st.integers(0, spec.STAGE_MODEL), u32, u32),
    st.builds(
        m.LoadCommitRequest, st.integers(0, spec.STAGE_MODEL), st.integers(1, 2**32 - 1), u32
    ),
    st.builds(m.LoadCommitResponse, st.integers(0, spec.STAGE_MODEL), u32, u32, u32),
    st.builds(
        m.ErrorResponse,
        st.sampled_from(list(m.ErrorCode)) | st.integers(1, 0xFFFF),
        st.integers(0, 255),
        st.text(max_size=40),
    ),
)


@given(messages)
def test_pack_unpack_round_trip(msg: m.Message) -> None:
    payload = msg.pack()
    assert len(payload) <= MAX_PAYLOAD
    back = type(msg).unpack(payload)
    assert back == msg
    assert back.pack() == payload


@given(messages, st.integers(0, 2**16 - 1))
def test_through_frames_and_registry(msg: m.Message, seq: int) -> None:
    (frame,) = FrameDecoder().feed(msg.encode(seq))
    assert frame.seq == seq and frame.type == msg.TYPE
    decode = m.decode_request if msg.TYPE in m.REQUESTS else m.decode_response
    assert decode(frame) == msg


@given(messages, st.data())
def test_truncated_or_extended_payload_raises(msg: m.Message, data: st.DataObject) -> None:
    payload = msg.pack()
    cls = type(msg)
    rest = {m.LoadModelRequest: "chunk", m.LoadDataRequest: "chunk", m.InferRequest: "input"}
    if cls not in rest:  # chunk, input = "the rest"
        extra = data.draw(st.binary(min_size=1, max_size=9))
        with pytest.raises(m.MessageError, match=cls.NAME) as e:
            cls.unpack(payload + extra)
        assert e.value.code == m.ErrorCode.BAD_LENGTH
    cuts = range(len(payload)) if len(payload) < 40 else [0, 1, len(payload) // 2, len(payload) - 1]
    for cut in cuts:
        try:
            got = cls.unpack(payload[:cut])
        except m.MessageError as e:
            assert cls.NAME in str(e)
        else:  # only a rest field (bulk chunk, INFER input) may be cut
            field = rest[cls]
            assert cut >= spec.LAYOUTS[m.MessageType(cls.TYPE).name].min_size
            assert getattr(got, field) == getattr(msg, field)[: len(getattr(got, field))]


def test_every_truncation_of_every_message_raises() -> None:
    samples = [
        m.HelloRequest(0),
        m.HelloResponse(0, 4096, 1, 0, "dev", "fw"),
        m.LoadModelRequest(10, 0, b""),
        m.LoadModelResponse(10, True, 5),
        m.LoadDataRequest(1, 10, 0, b""),
        m.LoadDataResponse(1, 10, True, 3),
        m.ProbeRequest(0, 1, 0, 1, [1, 2]),
        m.ProbeResponse([1, 2], [3, 4], 5, m.TimingSource.DEVICE),
        m.ApplyRequest([1, 2], [-1, 1]),
        m.ApplyResponse(1),
        m.EvalRequest(0, 0, 1),
        m.EvalResponse(2, 1, -5, 9, m.TimingSource.MODELED),
        m.WeightsCrcResponse(1, 2),
        m.ErrorResponse(m.ErrorCode.NO_MODEL, 4, "no model"),
        m.ResetRequest(),
        m.ResetResponse(),
        m.ApplyBatchRequest((m.ApplyRequest([1], [2]), m.ApplyRequest([3, 4], [5, -6]))),
        m.ApplyBatchResponse(7),
        m.ApplyProbedRequest([5, -6]),
        m.ApplyProbedResponse(8),
        m.ApplyProbeRequest([5, -6, 7], m.ProbeRequest(1, 32, 9, 2, [10, 11])),
        m.ApplyProbeResponse(9, m.ProbeResponse([1, 2], [3, 4], 5, m.TimingSource.MODELED)),
        m.InferRequest(1, 7, out_offset=3),
        m.InferResponse(np.array([-128, 5, 127], np.int8), 11, m.TimingSource.NONE, 9000),
        m.DeviceInfoResponse(*range(1, 17), m.TimingSource.DEVICE),
        m.DeviceInfoRequest(),
        m.LoadStageRequest(4, 100),
        m.LoadStageResponse(4, 0, 100),
        m.LoadCommitRequest(1, 100, 0xDEADBEEF),
        m.LoadCommitResponse(1, 100, 0, 3),
        m.HeadGradRequest(0, 32, 7, 9, 16, np.array([5, -6, 2**31 - 1], np.int32)),
        m.HeadGradResponse(0xDEADBEEF, -3, 4, 5, m.TimingSource.INSTRUCTIONS),
        m.LogFrame(spec.LogKind.BOOT, 0, "boot: dev, firmware fw, reset host"),
    ]
    assert {type(s) for s in samples} | {m.WeightsCrcRequest} == set(m.REQUESTS.values()) | set(
        m.RESPONSES.values()
    )
    for s in samples:
        p = s.pack()
        for cut in range(len(p)):
            with pytest.raises(m.MessageError) as e:
                type(s).unpack(p[:cut])
            assert e.value.code == m.ErrorCode.BAD_LENGTH, (s, cut)
    with pytest.raises(m.MessageError, match="trailing"):
        m.WeightsCrcRequest.unpack(b"\x00")


def test_layouts_match_the_document() -> None:
    assert m.HelloRequest(1, 0x11223344).pack() == struct.pack("<HI", 1, 0x11223344)
    assert m.HelloResponse(0, 4096, 0x11223344, 0, "ab", "c").pack() == (
        struct.pack("<HHII", 0, 4096, 0x11223344, 0) + b"\x02ab\x01c"
    )
    assert m.LoadModelRequest(300, 100, b"xy").pack() == struct.pack("<II", 300, 100) + b"xy"
    assert m.LoadModelResponse(300, True, 7).pack() == struct.pack("<IBI", 300, 1, 7)
    assert m.LoadDataRequest(2, 300, 0, b"z").pack() == struct.pack("<BII", 2, 300, 0) + b"z"
    assert m.LoadDataResponse(2, 300, True, 9).pack() == struct.pack("<BIBI", 2, 300, 1, 9)
    assert m.ProbeRequest(1, 32, 7, 2, [0, 0xDEADBEEF]).pack() == struct.pack(
        "<BHIHHII", 1, 32, 7, 2, 2, 0, 0xDEADBEEF
    )
    assert m.ProbeResponse([1, -1], [2, -2], 10, 1).pack() == struct.pack(
        "<HiiiiQB", 2, 1, -1, 2, -2, 10, 1
    )
    assert m.ApplyRequest([5], [-3]).pack() == struct.pack("<HIi", 1, 5, -3)
    assert m.ApplyResponse(4).pack() == struct.pack("<I", 4)
    assert m.EvalRequest(3, 10, 20).pack() == struct.pack("<BII", 3, 10, 20)
    assert m.EvalResponse(20, 19, -1, 5, 2).pack() == struct.pack("<IIqQB", 20, 19, -1, 5, 2)
    assert m.WeightsCrcRequest().pack() == b""
    assert m.WeightsCrcResponse(1, 2).pack() == struct.pack("<II", 1, 2)
    assert m.ErrorResponse(5, 4, "é").pack() == struct.pack("<HBH", 5, 4, 2) + "é".encode()
    sizes = {m.ProbeResponse: 11 + 8 * m.MAX_Q, m.ApplyRequest: 2 + 8 * m.MAX_Q}
    assert all(s <= MAX_PAYLOAD for s in sizes.values())
    assert 11 + 8 * (m.MAX_Q + 1) > MAX_PAYLOAD and m.MAX_Q == 510
    assert m.max_q(256) == 30


def test_type_codes() -> None:
    assert [int(t) for t in m.MessageType] == [*range(1, 17), 0xFE, 0xFF]
    assert [int(c) for c in m.ErrorCode] == list(range(1, 12))
    for t, cls in m.REQUESTS.items():
        assert m.RESPONSES[m.response_type(t)].NAME.split()[0] == cls.NAME.split()[0]
    assert m.RESPONSES[0xFF] is m.ErrorResponse
    assert m.type_name(0x84) == "PROBE response" and m.type_name(0x42) == "type 0x42"


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: m.ProbeRequest(4, 1, 0, 1, [1]), "slot"),
        (lambda: m.ProbeRequest(0, 0, 0, 1, [1]), "batch_size"),
        (lambda: m.ProbeRequest(0, 257, 0, 1, [1]), "batch_size"),
        (lambda: m.ProbeRequest(0, 1, 0, 0, [1]), "eps"),
        (lambda: m.ProbeRequest(0, 1, 0, 128, [1]), "eps"),
        (lambda: m.ProbeRequest(0, 1, 2**32, 1, [1]), "batch_seed"),
        (lambda: m.ProbeRequest(0, 1, 0, 1, []), "q"),
        (lambda: m.ProbeRequest(0, 1, 0, 1, [0] * (m.MAX_Q + 1)), "q"),
        (lambda: m.ProbeRequest(0, 1, 0, 1, [-1]), "seeds"),
        (lambda: m.ProbeRequest(0, 1, 0, 1, [1.5]), "seeds"),
        (lambda: m.ProbeRequest(0, 1, 0, 1, [[1]]), "seeds"),
        (lambda: m.ProbeRequest(0, 1, 0, 1, [1], q=2), "q"),
        (lambda: m.ApplyRequest([1, 2], [1]), "coeffs"),
        (lambda: m.ApplyRequest([1], [2**31]), "coeffs"),
        (lambda: m.ProbeResponse([1], [1, 2], 0, 0), "loss_minus"),
        (lambda: m.ProbeResponse([1], [1], 0, len(m.TimingSource)), "timing_source"),
        (lambda: m.ProbeResponse([1], [1], -1, 0), "duration_ns"),
        (lambda: m.LoadModelRequest(0, 0, b""), "total_len"),
        (lambda: m.LoadModelRequest(2, 1, b"ab"), "total_len"),
        (lambda: m.LoadModelRequest(10, 0, "text"), "chunk"),
        (lambda: m.LoadModelResponse(1, False, 5), "model_crc32"),
        (lambda: m.LoadModelResponse(1, 2, 0), "complete"),
        (lambda: m.LoadDataResponse(0, 1, False, 5), "n_items"),
        (lambda: m.LoadDataRequest(4, 1, 0, b""), "slot"),
        (lambda: m.EvalRequest(0, 0, 0), "count"),
        (lambda: m.EvalRequest(0, 2**32 - 1, 2), "'start' \\+ 'count'"),
        (lambda: m.EvalResponse(1, 2, 0, 0, 0), "correct"),
        (lambda: m.HelloResponse(0, 255, 0, 0, "", ""), "max_payload"),
        (lambda: m.HelloResponse(0, 4096, 0, 0, "x" * 65, ""), "device_id"),
        (lambda: m.HelloResponse(0, 4096, 0, 0, "", 5), "firmware"),
        (lambda: m.ErrorResponse(0, 1, ""), "code"),
        (lambda: m.ErrorResponse(1, 1, "x" * 257), "message"),
        (lambda: m.HelloRequest(1.0), "host_protocol_version"),
    ],
)
def test_out_of_range_fields_name_the_field(build, field: str) -> None:
    with pytest.raises(m.MessageError, match=field) as e:
        build()
    assert e.value.code in (m.ErrorCode.BAD_ARGUMENT, m.ErrorCode.BAD_LENGTH)


def test_unpack_range_errors_are_bad_argument() -> None:
    p = bytearray(m.ProbeRequest(0, 1, 0, 1, [1]).pack())
    p[7] = 200  # eps
    with pytest.raises(m.MessageError, match="PROBE request: field 'eps'") as e:
        m.ProbeRequest.unpack(bytes(p))
    assert e.value.code == m.ErrorCode.BAD_ARGUMENT
    zero_q = struct.pack("<BHIHH", 0, 1, 0, 1, 0)
    with pytest.raises(m.MessageError, match="'q'") as e:
        m.ProbeRequest.unpack(zero_q)
    assert e.value.code == m.ErrorCode.BAD_ARGUMENT
    huge_q = struct.pack("<BHIHH", 0, 1, 0, 1, 0xFFFF) + b"\x00" * 8
    with pytest.raises(m.MessageError, match="seeds") as e:
        m.ProbeRequest.unpack(huge_q)
    assert e.value.code == m.ErrorCode.BAD_LENGTH
    bad_utf8 = struct.pack("<HHII", 0, 4096, 0, 0) + b"\x01\xff\x00"
    with pytest.raises(m.MessageError, match="device_id"):
        m.HelloResponse.unpack(bad_utf8)


def test_arrays_are_read_only_numpy() -> None:
    seeds = np.array([1, 2, 3], dtype=np.uint32)
    r = m.ProbeRequest(0, 1, 0, 1, seeds)
    seeds[0] = 99  # the message keeps its own copy
    assert r.seeds[0] == 1 and r.q == 3
    back = m.ProbeRequest.unpack(r.pack())
    assert back.seeds.dtype == np.dtype("<u4") and not back.seeds.flags.writeable
    resp = m.ProbeResponse.unpack(m.ProbeResponse([1], [-1], 0, 0).pack())
    assert resp.loss_minus.dtype == np.dtype("<i4") and resp.loss_minus[0] == -1
    assert resp.timing_source is m.TimingSource.NONE
    with pytest.raises(ValueError):
        back.seeds[0] = 5


def test_decode_request_checks_version_and_type() -> None:
    hello = m.HelloRequest(0).pack()
    with pytest.raises(m.MessageError, match="version 1") as e:
        m.decode_request(Frame(0, m.MessageType.HELLO, 1, hello))
    assert e.value.code == m.ErrorCode.BAD_VERSION
    for t in (0x00, spec.LAST_REQUEST + 1, 0x81, 0xFF):  # the first free type
        with pytest.raises(m.MessageError) as e:
            m.decode_request(Frame(1, t, 1, b""))
        assert e.value.code == m.ErrorCode.UNKNOWN_TYPE
    with pytest.raises(m.MessageError) as e:
        m.decode_request(Frame(1, m.MessageType.HELLO, 1, b"\x00"))
    assert e.value.code == m.ErrorCode.BAD_LENGTH


def test_decode_response_reads_error_in_any_version() -> None:
    err = m.ErrorResponse(m.ErrorCode.BAD_VERSION, 1, "device speaks protocol version 3")
    assert m.decode_response(Frame(3, 0xFF, 1, err.pack())) == err
    with pytest.raises(m.MessageError) as e:
        m.decode_response(Frame(3, 0x81, 1, b""))
    assert e.value.code == m.ErrorCode.BAD_VERSION
    with pytest.raises(m.MessageError) as e:
        m.decode_response(Frame(PROTOCOL_VERSION, 0x01, 1, b"\x00\x00"))
    assert e.value.code == m.ErrorCode.UNKNOWN_TYPE
    future = m.ErrorResponse.unpack(struct.pack("<HBH", 999, 4, 0))
    assert future.code == 999 and "code 999" in str(future)
    assert str(err).startswith("BAD_VERSION (request HELLO)")
