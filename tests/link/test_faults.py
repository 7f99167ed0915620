"""The fault injector itself: parsing, determinism, and each kind of damage."""

import pytest

from hilbench.errors import ConfigError
from hilbench.link.faults import FaultSpec, FaultyPort, _split
from hilbench.protocol.frames import FrameDecoder, encode_frame


class LoopPort:
    """Bytes written come back on read (pyserial's loop:// without the timing)."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.timeout = 0.0

    @property
    def in_waiting(self) -> int:
        return len(self.buffer)

    def write(self, data: bytes) -> int:
        self.buffer += data
        return len(data)

    def read(self, size: int = 1) -> bytes:
        out = bytes(self.buffer[:size])
        del self.buffer[:size]
        return out

    def close(self) -> None:
        pass


def test_spec_parsing_and_its_errors():
    spec = FaultSpec.parse(
        "drop=0.01,corrupt=0.02,duplicate=0.03,delay=0.04,truncate=0.05,reset=0.001,seed=7"
    )
    assert (spec.drop, spec.truncate, spec.reset, spec.seed) == (0.01, 0.05, 0.001, 7)
    assert spec.any() and not FaultSpec.parse("seed=3").any()
    for bad, needle in [
        ("loss=0.1", "known kind"),
        ("drop=lots", "not a number"),
        ("drop=1.5", "probability"),
        ("drop=0.6,corrupt=0.6", "add up"),
    ]:
        with pytest.raises(ConfigError, match=needle):
            FaultSpec.parse(bad)


def test_split_keeps_each_frame_with_its_delimiters():
    a, b = b"\x00" + encode_frame(1, 1, b"x"), b"\x00" + encode_frame(2, 2, b"yz")
    assert _split(a + b) == [a, b]
    assert _split(a + b"\x05\x06") == [a, b"\x05\x06"]


@pytest.mark.parametrize("kind", ["drop", "corrupt", "duplicate", "truncate"])
def test_each_fault_kind_does_what_it_says(kind):
    port = FaultyPort(LoopPort(), FaultSpec(**{kind: 1.0}, seed=1))
    frames = [encode_frame(4, i, bytes(range(20))) for i in range(50)]
    for f in frames:
        port.port.write(b"\x00" + f)  # device -> host through the injector
    decoder = FrameDecoder()
    got = []
    while port.in_waiting:
        got += decoder.feed(port.read(4096))
    assert port.counts[kind] == 50
    if kind == "drop":
        assert got == []
    elif kind == "duplicate":
        assert [fr.seq for fr in got] == [i for i in range(50) for _ in (0, 1)]
    else:  # damaged frames never decode as valid ones
        assert got == [] and decoder.n_errors >= 45


def test_the_same_seed_injects_the_same_faults():
    def run() -> list[bytes]:
        port = FaultyPort(
            LoopPort(), FaultSpec.parse("drop=0.2,corrupt=0.2,duplicate=0.2,truncate=0.2,seed=5")
        )
        for i in range(200):
            port.write(b"\x00" + encode_frame(1, i, b"abc"))
        return bytes(port.port.buffer)

    assert run() == run()


def test_over_a_synchronous_link_a_read_waits_its_timeout_for_a_delayed_answer():
    """Over the in-memory link the answer is there when write returns; a delayed one comes
    within the read's timeout, as over a serial port, not to a caller spinning on empty reads."""
    from hilbench.link.memory import MemoryPort

    answer = b"\x00" + encode_frame(0x84, 1, b"ok")
    port = FaultyPort(MemoryPort(lambda data: answer), FaultSpec(delay=1.0, max_delay_s=0.05))
    port.timeout = 1.0
    port.write(b"\x00" + encode_frame(4, 1, b"go"))
    assert port.counts["delay"] == 1
    assert port.read(4096) == answer  # one read: it slept until the frame was due
    lost = FaultyPort(MemoryPort(lambda data: answer), FaultSpec(drop=1.0))
    lost.timeout = 0.05
    lost.write(b"\x00" + encode_frame(4, 1, b"go"))
    assert lost.read(4096) == b""  # nothing comes: empty after the timeout
