"""Talking to a twin frame by frame, without a link; small models and data for the tests."""

from __future__ import annotations

import numpy as np

from hilbench.device import DeviceTwin
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.protocol import data_blob
from hilbench.protocol import messages as m
from hilbench.protocol.frames import PROTOCOL_VERSION, FrameDecoder, encode_frame
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables


class Wire:
    """A host's side of a twin: numbered frames in, decoded answers out (None if dropped)."""

    def __init__(self, twin: DeviceTwin, seq: int = 0, session: int = 0x5E55) -> None:
        self.twin = twin
        self.decoder = FrameDecoder()
        self.seq = seq
        self.session = session
        self.said: list = []  # the LOG frames that came with the last answer

    def send_raw(
        self,
        frame_type: int,
        payload: bytes,
        seq: int | None = None,
        version: int = PROTOCOL_VERSION,
    ):
        """(answer bytes, decoded answer); (b"", None) when the twin dropped the frame."""
        if seq is None:  # the next number after the last one sent
            seq = (self.seq + 1) & 0xFFFF
        self.seq = seq
        wire = encode_frame(frame_type, seq, payload, version=version)
        (frame,) = self.decoder.feed(wire)
        answer = self.twin.handle(frame)
        if not answer:
            return b"", None
        # the device's own LOG lines (seq 0) may come first: a host takes them aside
        frames = self.decoder.feed(answer)
        self.said = [f for f in frames if f.type == m.MessageType.LOG and f.seq == 0]
        (reply,) = [f for f in frames if f not in self.said]
        assert reply.seq == seq
        return answer, m.decode_response(reply)

    def send(self, request, seq: int | None = None):
        return self.send_raw(request.TYPE, request.pack(), seq)[1]

    def hello(self, session: int | None = None, seq: int | None = None) -> m.HelloResponse:
        token = self.session if session is None else session
        return self.send(m.HelloRequest(host_protocol_version=PROTOCOL_VERSION, session=token), seq)

    def load_model(self, blob: bytes, chunk: int = 1000):
        reply = None
        for offset in range(0, len(blob), chunk):
            reply = self.send(
                m.LoadModelRequest(
                    total_len=len(blob), offset=offset, chunk=blob[offset : offset + chunk]
                )
            )
        return reply

    def load_data(self, slot: int, blob: bytes, chunk: int = 1000):
        reply = None
        for offset in range(0, len(blob), chunk):
            reply = self.send(
                m.LoadDataRequest(
                    slot=slot,
                    total_len=len(blob),
                    offset=offset,
                    chunk=blob[offset : offset + chunk],
                )
            )
        return reply

    def crc(self) -> tuple[int, int]:
        r = self.send(m.WeightsCrcRequest())
        return r.crc32, r.updates_applied


def in_session(twin: DeviceTwin, **kw) -> Wire:
    wire = Wire(twin, **kw)
    assert isinstance(wire.hello(), m.HelloResponse)
    return wire


def model_blob(name: str = "mlp", seed: int = 3, **zo: object) -> tuple[object, bytes]:
    """(graph, blob with LOSS and ZOCF sections) of a small zoo model."""
    kw = {k: zo.pop(k) for k in ("sizes",) if k in zo}
    g = zoo.build(name, seed=seed, **kw)
    cfg = zocf.build(g, **zo) if zo else zocf.ZoConfig()
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    return g, to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()})


def data(n: int = 24, item: int = 64, classes: int = 10, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (n, item)).astype(np.int8)
    y = rng.integers(0, classes, n).astype(np.uint8)
    return data_blob.encode(x, y, classes)


def loaded(twin: DeviceTwin | None = None, blob: bytes | None = None, **kw) -> Wire:
    """A twin in session with the zoo MLP in its model region and data in slot 0."""
    wire = in_session(twin or DeviceTwin(boot_nonce=1), **kw)
    reply = wire.load_model(blob or model_blob()[1])
    assert reply.complete, reply
    assert wire.load_data(0, data()).complete
    return wire


def probe(slot: int = 0, q: int = 2, batch: int = 4, seed: int = 1) -> m.ProbeRequest:
    seeds = np.arange(seed, seed + q, dtype=np.uint32)
    return m.ProbeRequest(slot=slot, batch_size=batch, batch_seed=seed, eps=2, seeds=seeds)
