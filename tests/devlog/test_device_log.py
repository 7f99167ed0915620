"""The device's own words (docs/protocol.md, "Device log"): LOG frames from the twin, the SIL
and the Cortex-M55 under QEMU, taken by the client, written to the trace as ``device`` events,
shown by ``hilbench report`` and in a failing test's section; and the bytes a port sent before
its first frame, in the trace and in the "no answer" error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hilbench.backend.qemu import QemuBackend
from hilbench.backend.sil import SilBackend
from hilbench.client.device_client import DeviceClient
from hilbench.device import BANNER_REASONS, DeviceTwin, FrameEndpoint
from hilbench.errors import DeviceError, LinkError
from hilbench.link.memory import MemoryPort
from hilbench.protocol import messages as m
from hilbench.protocol import spec
from hilbench.protocol.frames import FrameDecoder, encode_frame
from hilbench.trace import Trace


def _frames(wire: bytes):
    return FrameDecoder().feed(wire)


def _hello(seq: int, session: int = 7) -> bytes:
    return b"\x00" + encode_frame(m.MessageType.HELLO, seq, m.HelloRequest(session=session).pack())


def test_the_twin_holds_its_banner_until_a_session_opens_then_sends_it_first():
    twin = DeviceTwin(device_id="dev-a", firmware="fw-b", boot_nonce=1, **BANNER_REASONS)
    ep = FrameEndpoint(twin)
    # no session: the refusal goes alone, the banner waits
    before = _frames(ep.feed(b"\x00" + encode_frame(m.MessageType.WEIGHTS_CRC, 5)))
    assert [f.type for f in before] == [m.ERROR]
    answer = _frames(ep.feed(_hello(6)))
    assert [(f.type, f.seq) for f in answer] == [(0xFE, 0), (0x81, 6)]
    log = m.decode_response(answer[0])
    assert (log.kind, log.dropped) == (spec.LogKind.BOOT, 0)
    assert log.message == "boot: dev-a, firmware fw-b, reset power-on"
    # sent once: the next answer comes alone, and a retried HELLO's cached answer too
    assert [f.type for f in _frames(ep.feed(_hello(6)))] == [0x81]
    # RESET: answered, then the new boot's banner waits for the next session
    reset = _frames(ep.feed(b"\x00" + encode_frame(m.MessageType.RESET, 7)))
    assert [f.type for f in reset] == [0x88]
    again = _frames(ep.feed(_hello(8, session=9)))
    assert m.decode_response(again[0]).message.endswith("reset software")


def test_a_twin_made_without_reasons_is_silent_as_the_c_test_port():
    answer = _frames(FrameEndpoint(DeviceTwin(boot_nonce=1)).feed(_hello(1)))
    assert [f.type for f in answer] == [0x81]


def test_a_full_ring_drops_its_oldest_lines_and_says_how_many():
    twin = DeviceTwin(boot_nonce=1, **BANNER_REASONS)
    for i in range(spec.LOG_RING + 3):
        twin.log.add(spec.LogKind.NOTE, f"note {i} " + "é" * 80)  # cut at 120 bytes of UTF-8
    lines = [m.decode_response(f) for f in _frames(FrameEndpoint(twin).feed(_hello(1)))[:-1]]
    assert len(lines) == spec.LOG_RING
    assert [x.dropped for x in lines] == [4] + [0] * (spec.LOG_RING - 1)  # banner + 3 lost
    assert lines[0].message.startswith("note 3 ")
    # "note 3 " + 56 é is 119 bytes (one more é would split at 120); "note 10 " + 56 é is 120
    assert [len(x.message.encode()) for x in lines] == [119] * 7 + [120]


def test_the_client_hands_lines_to_subscribers_and_keeps_the_last():
    twin = DeviceTwin(device_id="dev-a", firmware="fw-b", boot_nonce=1, **BANNER_REASONS)
    client = DeviceClient(MemoryPort(FrameEndpoint(twin).feed, name="mem"))
    heard = []
    client.events.device.subscribe(heard.append)
    client.hello()
    assert [str(line) for line in heard] == ["[boot] boot: dev-a, firmware fw-b, reset power-on"]
    assert client.stats["stale"] == 0  # a LOG frame is not a late answer
    twin.log.add(spec.LogKind.UART, "uart errors: overrun 1, framing 0, noise 0, dropped 0")
    with pytest.raises(DeviceError, match="NO_MODEL"):  # a refusal carries the lines too
        client.weights_crc()
    assert [line.kind for line in client.device_log.lines] == ["boot", "uart"]
    assert client.device_log.raw_before_hello == b""


class _Console:
    """A port whose device prints a console line before it speaks the protocol."""

    def __init__(self, text: bytes, answers: bool) -> None:
        self.twin = DeviceTwin(boot_nonce=1, **BANNER_REASONS)
        self.endpoint = FrameEndpoint(self.twin)
        self.text, self.answers = text, answers

    def feed(self, data: bytes) -> bytes:
        out, self.text = self.text, b""
        return out + (self.endpoint.feed(data) if self.answers else b"")


def test_what_a_port_printed_before_any_frame_is_in_the_no_answer_error():
    console = _Console(b"U-Boot 2024.01 (Jan 01 2024)\r\nHit any key to stop autoboot\r\n", False)
    client = DeviceClient(MemoryPort(console.feed, name="mem"), timeout=0.05, retries=1)
    with pytest.raises(LinkError) as err:
        client.hello()
    assert "before any HELLO answer the port sent text 'U-Boot 2024.01" in str(err.value)
    assert client.device_log.raw_before_hello.startswith(b"U-Boot")


def test_the_bytes_before_the_first_frame_are_bounded_and_stop_at_the_first_frame():
    console = _Console(b"x" * 5000 + b"\r\n", True)
    client = DeviceClient(MemoryPort(console.feed, name="mem"))
    client.hello()
    assert client.device_log.raw_before_hello == b"x" * 4096
    assert [line.kind for line in client.device_log.lines] == ["boot"]


def test_a_sil_run_records_the_banner_in_the_trace_and_report_shows_it(tmp_path):
    trace = tmp_path / "t.h5"
    cmd = [sys.executable, "-m", "hilbench"]
    run = subprocess.run(
        [*cmd, "run", "--sil", "--budget", "400", "--trace", str(trace)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    t = Trace.open(trace)
    device = t.events[t.events["kind"] == "device"]
    assert len(device) == 1
    assert (
        device["detail"][0]
        == "[boot] boot: hilbench-sil, firmware hilbench-sil protocol 1, reset host"
    )
    assert int(device["step"][0]) == 0 and device["time"][0] > 1.7e9
    report = subprocess.run(
        [*cmd, "report", str(trace)], capture_output=True, text=True, timeout=120
    )
    assert report.returncode == 0, report.stderr
    assert "the device's own words (last 1 of 1):" in report.stdout
    assert "step 0     [boot] boot: hilbench-sil" in report.stdout


def test_the_sil_after_reset_says_its_banner_again():
    backend = SilBackend()
    client = backend.open().client
    try:
        client.hello()
        client.reset()
        client.hello()
        texts = [line.text for line in client.device_log.lines]
        assert texts == ["boot: hilbench-sil, firmware hilbench-sil protocol 1, reset host"] * 2
    finally:
        backend.close()


def test_the_cortex_m55_under_qemu_says_power_on_then_software_after_reset():
    backend = QemuBackend()
    client = backend.open().client
    try:
        client.hello()
        client.reset()
        client.hello()
        texts = [line.text for line in client.device_log.lines]
        assert texts == [
            "boot: hilbench-an547, firmware hilbench-an547 protocol 1, reset power-on",
            "boot: hilbench-an547, firmware hilbench-an547 protocol 1, reset software",
        ]
    finally:
        backend.close()


def test_a_run_records_what_the_port_printed_before_the_device_spoke(tmp_path):
    from hilbench import session
    from hilbench.config import RunConfig

    console = _Console(b"bootloader v2: waiting for image\r\n", True)
    client = DeviceClient(MemoryPort(console.feed, name="mem"))
    result = session.run(RunConfig(budget=40, trace=tmp_path / "t.h5"), target=client)
    t = Trace.open(tmp_path / "t.h5")
    assert result.forward_passes == 40
    kinds = [str(k) for k in t.events["kind"]]
    details = [str(d) for d in t.events["detail"]]
    # the junk made the host drop one damaged frame (resync); recorded first: what it was
    assert kinds == ["console", "resync", "device"], kinds
    assert details[0] == (
        "34 bytes before the first frame: text 'bootloader v2: waiting for image\\r\\n'"
    )
    assert details[2] == f"[boot] boot: hilbench-twin, firmware {console.twin.firmware}, " + (
        "reset power-on"
    )
