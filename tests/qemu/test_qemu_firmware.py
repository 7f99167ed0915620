"""The an547 port itself (its fresh build and the C unit tests on the M55 are
test_an547_kernels.py's): the tick counter under -icount counts executed instructions; bytes
keep arriving while a command computes (a retry is answered from the cache) and a burst larger
than the receive ring loses nothing; boot nonces; a refused option and a fault end QEMU with a
report."""

from __future__ import annotations

import re
import socket
import time

import numpy as np
import pytest

from hilbench.backend.qemu import QemuBackend
from hilbench.errors import LinkError
from hilbench.launch import an547
from hilbench.launch.qemu import QemuProcess, firmware_args
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.protocol import data_blob
from hilbench.protocol import messages as m
from hilbench.protocol.frames import FrameDecoder, encode_frame
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables


def _mlp_blob() -> tuple[bytes, bytes]:
    g = zoo.build("mlp", seed=2)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    blob = to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": zocf.build(g).to_bytes()})
    rng = np.random.default_rng(1)
    item, classes = int(np.prod(g.input_shape)), int(np.prod(g.output_shape))
    x = rng.integers(-128, 128, (256, item)).astype(np.int8)
    y = rng.integers(0, classes, 256).astype(np.uint8)
    return blob, data_blob.encode(x, y, classes)


def test_icount_durations_are_executed_instructions(an547_elf):
    blob, data = _mlp_blob()
    batch = dict(slot=0, batch_seed=5, eps=2)
    with QemuBackend(an547_elf) as target:
        target.load_model(blob)
        target.load_data_blob(0, data)
        # the first PROBE after a load runs a few dozen instructions of one-time setup more
        # (63 here: two ticks), so the same work is compared from the second one on
        first = target.probe(batch_size=8, seeds=np.arange(2, dtype=np.uint32), **batch)
        one = target.probe(batch_size=8, seeds=np.arange(2, dtype=np.uint32), **batch)
        again = target.probe(batch_size=8, seeds=np.arange(2, dtype=np.uint32), **batch)
        # 4x the samples: 4x the passes, each over the same items (the perturbed copy is made
        # once per pass, so a larger batch alone would not cost 4x)
        double = target.probe(batch_size=8, seeds=np.arange(8, dtype=np.uint32), **batch)
    assert one.timing_source == again.timing_source == m.TimingSource.INSTRUCTIONS
    # the same work executes the same instructions (to one SysTick tick: 31.25 of them) ...
    assert abs(one.duration_ns - again.duration_ns) <= 32
    assert 0 <= first.duration_ns - one.duration_ns <= 200  # the setup: small, and once
    # ... and four times the forward passes about four times as many
    assert 3.9 < double.duration_ns / one.duration_ns < 4.1
    assert one.duration_ns > 100_000
    with QemuBackend(an547_elf, icount=False) as target:  # QEMU's clock is the host's: none
        target.load_model(blob)
        target.load_data_blob(0, data)
        plain = target.probe(batch_size=8, seeds=np.arange(2, dtype=np.uint32), **batch)
    assert plain.timing_source == m.TimingSource.NONE and plain.duration_ns == 0
    assert plain.loss_plus.tolist() == one.loss_plus.tolist()


def _frames(sock: socket.socket, n: int, timeout: float = 60.0) -> list:
    """The next ``n`` answers the device sends (fewer if it goes quiet); its own LOG lines
    (seq 0, the boot banner before the first HELLO answer) are set aside, as a host does."""
    decoder, frames, deadline = FrameDecoder(), [], time.monotonic() + timeout
    sock.settimeout(1.0)
    while len(frames) < n and time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            break
        frames += [
            f for f in decoder.feed(chunk) if not (f.type == m.MessageType.LOG and not f.seq)
        ]
    return frames


def test_bytes_arrive_while_a_command_computes_and_a_burst_loses_nothing(an547_elf):
    blob, data = _mlp_blob()
    process = QemuProcess(an547_elf, firmware_args(boot_nonce=7))
    try:
        sock = socket.create_connection(("127.0.0.1", process.start()), timeout=10)
        seq = iter(range(1, 10_000))

        def frame(kind, payload: bytes = b"") -> bytes:
            return b"\x00" + encode_frame(kind, next(seq), payload)

        T = m.MessageType
        setup = frame(T.HELLO, m.HelloRequest(session=42).pack())
        for off in range(0, len(blob), 1000):  # the model and data: one burst of 20 KB+
            chunk = blob[off : off + 1000]
            setup += frame(T.LOAD_MODEL, m.LoadModelRequest(len(blob), off, chunk).pack())
        for off in range(0, len(data), 1000):
            chunk = data[off : off + 1000]
            setup += frame(T.LOAD_DATA, m.LoadDataRequest(0, len(data), off, chunk).pack())
        n_setup = setup.count(b"\x00") // 2
        assert len(setup) > 16384  # more than the firmware's receive ring holds
        sock.sendall(setup)
        answers = _frames(sock, n_setup)
        assert len(answers) == n_setup
        assert all(f.type != m.ERROR for f in answers), [m.decode_response(f) for f in answers]
        # a long PROBE, its retry and another request sent while it computes
        probe = frame(T.PROBE, m.ProbeRequest(0, 64, 3, 2, np.arange(16, dtype=np.uint32)).pack())
        crc = frame(T.WEIGHTS_CRC)
        sock.sendall(probe)
        time.sleep(0.05)
        sock.sendall(probe + crc)
        answers = _frames(sock, 3)
        assert [f.type for f in answers] == [T.PROBE | 0x80, T.PROBE | 0x80, T.WEIGHTS_CRC | 0x80]
        assert answers[0].seq == answers[1].seq and answers[0].payload == answers[1].payload
        first = m.decode_response(answers[0])  # the retry: from the cache, computed once
        assert first.duration_ns > 0 and first.timing_source == m.TimingSource.INSTRUCTIONS
    finally:
        process.stop()
    assert process.boots() == 1


def test_boot_nonces_fixed_and_random(an547_elf):
    with QemuBackend(an547_elf, boot_nonce=1000) as target:
        assert target.info.boot_nonce == 1000
        target.reset()
        assert target.hello().boot_nonce == 1001  # the next boot: N + 1
    nonces = set()
    for _ in range(2):
        with QemuBackend(an547_elf) as target:
            nonces.add(target.info.boot_nonce)
    assert len(nonces) == 2


def test_a_refused_option_ends_qemu_with_the_reason(an547_elf):
    with pytest.raises(LinkError) as err:
        QemuBackend(an547_elf, max_payload=9).open()
    text = str(err.value)
    assert f"exited with code {an547.EXIT_BAD_OPTION} (the firmware refused an option)" in text
    assert (
        "hilbench-an547: --max-payload: 9 is outside 256..4096: give a value in that range" in text
    )


def test_a_fault_ends_qemu_and_the_error_carries_the_report(an547_elf):
    backend = QemuBackend(an547_elf, crash_after=2)
    target = backend.open().client  # HELLO: frame 1
    try:
        target.hello()  # frame 2: answered, then the firmware faults
        with pytest.raises(LinkError) as err:
            target.weights_crc()
        uart = bytes(target.port.tail)  # the QemuPort: every byte the UART sent, at the end
    finally:
        backend.close()
    text = str(err.value)
    assert f"QEMU exited with code {an547.EXIT_FAULT} (the firmware faulted)" in text
    fault = an547.find_fault(text)
    assert fault is not None, text
    values = dict(
        zip(
            ("exception", "pc", "lr", "xpsr", "sp", "cfsr", "hfsr", "mmfar", "bfar", "sfsr"),
            an547.template_regex(an547.MESSAGES["FAULT"]).search(fault).groups(),
            strict=True,
        )
    )
    assert values["exception"] == "3"  # HardFault (the BusFault escalated)
    assert int(values["hfsr"], 16) & (1 << 30)  # FORCED
    assert int(values["cfsr"], 16) & (1 << 15)  # BFARVALID
    assert values["bfar"] == "ef000000"  # the address the crash read
    # the message ends with the UART's last bytes: the end of the handler's ERROR frame
    shown = re.search(r"UART tail: ((?:[0-9a-f]{2} )*[0-9a-f]{2})", text).group(1)
    assert uart.endswith(bytes.fromhex(shown.replace(" ", ""))) and uart.endswith(b"\x00")
    errors = [m.decode_response(f) for f in FrameDecoder().feed(uart) if f.type == m.ERROR]
    assert errors[-1].code == m.ErrorCode.INTERNAL
    assert errors[-1].message == f"internal error: {fault}"
