"""The loader against a RECORDING STAND-IN of pyOCD's target API (tests/board/standin.py; no
board here), through hilbench's PyocdTarget adapter: the exact sequence of pyOCD calls (halt,
segment writes, vector table read back, VTOR, emulated core reset, SP/PC, resume; no system
reset after a load), the skip when HELLO names this build, the lower SWD frequency after a probe
error, and the failures a lab user meets. The real stm32n6 ELF is loaded; the device twin stands
in for the firmware on the serial port (a pty) once the core resumes."""

from __future__ import annotations

import pytest
from pyocd.core.target import Target as PyocdApi

from hilbench.board import elfimage, stm32n6
from hilbench.board.debug import VTOR, DebugLinkError
from hilbench.board.loader import CHUNK_BYTES, load
from hilbench.board.ports import open_board_port
from hilbench.board.pyocd_target import PyocdTarget
from hilbench.errors import HilbenchError, LinkError
from hilbench.protocol.spec import PROTOCOL_VERSION
from tests.board.standin import RecordingCortexM

RAM = (stm32n6.RAM_START, stm32n6.RAM_START + stm32n6.RAM_BYTES)
PROBE = "003A00293433510F37363934"  # an ST-LINK-V3 serial number's shape


def firmware_string(image) -> str:
    return f"hilbench-stm32n6 protocol {PROTOCOL_VERSION} build {image.image_id}"


class Probe:
    """connect(frequency) for the loader: a fresh stand-in per connection, as pyOCD opens a
    new session; ``on_resume`` is what the board does when the core runs."""

    def __init__(self, on_resume=None, **standin) -> None:
        self.frequencies: list[int] = []
        self.targets: list[RecordingCortexM] = []
        self.standin = standin
        self.on_resume = on_resume
        self.fail_first = 0  # connections whose writes fail after 2 blocks

    def __call__(self, frequency: int) -> PyocdTarget:
        self.frequencies.append(frequency)
        cortex = RecordingCortexM(RAM, **self.standin)
        if len(self.targets) < self.fail_first:
            cortex.fail_writes_after = 2
        resume = cortex.resume

        def resumed() -> None:
            resume()
            if self.on_resume:
                self.on_resume()

        cortex.resume = resumed
        self.targets.append(cortex)
        return PyocdTarget(cortex, name=PROBE)


@pytest.fixture
def image(stm32n6_elf):
    return elfimage.read_image(stm32n6_elf)


def expected_calls(image) -> list[tuple]:
    calls: list[tuple] = [("halt",)]
    for seg in image.segments:
        for off in range(0, len(seg.data), CHUNK_BYTES):
            calls.append(
                ("write_memory_block8", seg.address + off, len(seg.data[off:][:CHUNK_BYTES]))
            )
    return [
        *calls,
        ("read_memory_block8", image.vector_table, 8),
        ("write32", VTOR, image.vector_table),
        ("reset_and_halt", PyocdApi.ResetType.EMULATED),
        ("read_core_register", "sp"),
        ("read_core_register", "pc"),
        ("resume",),
    ]


def test_exact_sequence_and_no_system_reset(image, twin_board):
    probe = Probe(on_resume=lambda: twin_board.start(firmware_string(image)))
    port = open_board_port(twin_board.path, stm32n6.DEFAULT_BAUD)
    progress = []
    result = load(image, probe, port, board=PROBE, progress=lambda d, t: progress.append((d, t)))
    try:
        (cortex,) = probe.targets
        assert cortex.calls == expected_calls(image)
        assert not any(c[0] == "reset" for c in cortex.calls)
        # the RAM holds the image, byte for byte, and the core starts at its reset handler
        for seg in image.segments:
            got = bytes(cortex.memory.get(seg.address + i, 0) for i in range(len(seg.data)))
            assert got == seg.data
        assert cortex.regs["pc"] == image.reset_pc & ~1 and cortex.regs["sp"] == image.initial_sp
        assert not result.skipped and result.frequency == probe.frequencies[0]
        assert result.bytes_written == image.load_bytes > 50_000
        assert progress[0] == (0, image.load_bytes) and progress[-1] == (image.load_bytes,) * 2
        assert result.info.firmware == firmware_string(image)
        assert [name for name, _ in result.steps][-2:] == ["resume", "wait for HELLO"]
        assert result.steps[1][0] == f"connect probe at {probe.frequencies[0] / 1e6:g} MHz"
    finally:
        result.target.close()


def test_skips_the_load_when_hello_names_this_build(image, twin_board):
    twin_board.start(firmware_string(image))
    probe = Probe()
    result = load(image, probe, open_board_port(twin_board.path, 921600))
    result.target.close()
    assert result.skipped and probe.frequencies == []  # the probe was not even opened


def test_loads_when_another_build_runs(image, twin_board):
    other = f"hilbench-stm32n6 protocol {PROTOCOL_VERSION} build {'0' * 16}"
    twin_board.start(other)
    probe = Probe()
    result = load(image, probe, open_board_port(twin_board.path, 921600))
    result.target.close()
    assert not result.skipped and probe.targets[0].calls == expected_calls(image)


def test_probe_error_retries_at_a_lower_swd_frequency(image, twin_board):
    probe = Probe(on_resume=lambda: twin_board.start(firmware_string(image)))
    probe.fail_first = 1
    result = load(
        image, probe, open_board_port(twin_board.path, 921600), frequencies=(4_000_000, 1_000_000)
    )
    result.target.close()
    assert probe.frequencies == [4_000_000, 1_000_000] and result.frequency == 1_000_000
    first, second = probe.targets
    assert ("resume",) not in first.calls and first.calls[-1][0] == "write_memory_block8"
    assert second.calls == expected_calls(image)


def test_probe_that_stops_answering_is_one_line(image, twin_board):
    probe = Probe()
    probe.fail_first = 3
    port = open_board_port(twin_board.path, 921600)
    with pytest.raises(DebugLinkError) as err:
        load(image, probe, port, frequencies=(4_000_000, 1_000_000, 200_000))
    port.close()
    text = str(err.value)
    assert probe.frequencies == [4_000_000, 1_000_000, 200_000]
    assert "stopped answering at every SWD frequency" in text and "\n" not in text
    assert "replug" in text and "partial image" in text
    assert "Transfer Fault" in text


def test_board_not_in_development_boot(image, twin_board):
    probe = Probe(keeps_writes=False)
    port = open_board_port(twin_board.path, 921600)
    with pytest.raises(HilbenchError) as err:
        load(image, probe, port, frequencies=(4_000_000,))
    port.close()
    assert "development boot" in str(err.value) and "BOOT1" in str(err.value)
    assert ("resume",) not in probe.targets[0].calls  # never started a half image


def test_firmware_that_does_not_answer_shows_the_uart_tail(image, twin_board):
    probe = Probe(on_resume=lambda: twin_board.say(b"boot ROM: no image\r\n"))
    port = open_board_port(twin_board.path, 921600)
    with pytest.raises(LinkError) as err:
        load(image, probe, port, frequencies=(4_000_000,), hello_timeout=0.6)
    port.close()
    text = str(err.value)
    assert "did not answer HELLO" in text and "boot ROM: no image" in text and "\n" not in text
    assert "--baud" in text


def test_the_standin_has_pyocds_method_names_and_parameters():
    """Every method the stand-in offers exists on pyOCD's SoCTarget (what session.target is)
    with the parameters PyocdTarget passes, so the recorded sequence is one pyOCD can run."""
    import inspect

    from pyocd.core.soc_target import SoCTarget

    for name, params in {
        "halt": [],
        "write_memory_block8": ["addr", "data"],
        "read_memory_block8": ["addr", "size"],
        "write32": ["addr", "value"],
        "read32": ["addr"],
        "reset_and_halt": ["reset_type"],
        "read_core_register": ["id"],
        "resume": [],
        "reset": ["reset_type"],
    }.items():
        real = list(inspect.signature(getattr(SoCTarget, name)).parameters)[1:]
        assert real[: len(params)] == params, (name, real)
        assert callable(getattr(RecordingCortexM, name))
