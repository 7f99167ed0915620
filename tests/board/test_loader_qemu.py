"""END TO END: the loader's GDB-remote path against QEMU's MPS3 AN547 (a Cortex-M55) started
halted with its GDB stub and no image. The an547 firmware ELF (make -C device_fw an547) is
written segment by segment through the same load() the board uses, the core reset emulated
through the stub, the UART opened before the core resumes, and the firmware answers HELLO.
Nothing here is a stand-in: QEMU runs the real image."""

from __future__ import annotations

import pytest

from hilbench.backend.emulate import EmulatorBackend
from hilbench.board import elfimage
from hilbench.board.gdbremote import GdbRemoteTarget
from hilbench.board.loader import load
from hilbench.board.ports import open_board_port
from hilbench.cli import main
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables
from tests.board.qemu_stub import HaltedQemu, free_port
from tests.needs import need_tool


@pytest.fixture
def image(an547_elf):
    need_tool("qemu-system-arm", "apt install qemu-system-arm")
    return elfimage.read_image(an547_elf, elfimage.AN547)


@pytest.fixture
def qemu(image):
    q = HaltedQemu(firmware=f"hilbench-an547 build {image.image_id}")
    yield q
    q.stop()


def mlp_blob() -> bytes:
    g = zoo.build("mlp", seed=2)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    return to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": zocf.build(g).to_bytes()})


class Stub:
    """connect(frequency) over QEMU's stub, keeping each connection for the checks."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connections: list[GdbRemoteTarget] = []

    def __call__(self, frequency: int) -> GdbRemoteTarget:
        target = GdbRemoteTarget("127.0.0.1", self.port)
        self.connections.append(target)
        return target


def test_loads_the_an547_image_through_qemus_gdb_stub_and_gets_hello(image, qemu):
    stub = Stub(qemu.gdb_port)
    port = open_board_port(qemu.uart_url, 115200)
    result = load(image, stub, port, board="QEMU an547", frequencies=(0,))
    try:
        assert not result.skipped and result.bytes_written == image.load_bytes
        assert result.info.device_id == "hilbench-an547"
        assert result.steps[1][0] == "connect probe at the link's own speed"  # no SWD: no MHz
        assert result.info.firmware == f"hilbench-an547 build {image.image_id}"
        (conn,) = stub.connections
        # one M packet per chunk, segment by segment, then the core reset's registers, then D
        writes = [p for p in conn.packets_sent if p[:1] == b"M"]
        starts = {int(p[1:], 16) for p in writes}
        assert all(seg.address in starts for seg in image.segments)
        assert conn.packets_sent[-1] == b"D"
        assert any(p[:1] == b"P" for p in conn.packets_sent)
        # the device works past HELLO: a model loads and its weights' CRC is the twin's
        blob = mlp_blob()
        result.target.load_model(blob)
        with EmulatorBackend(link="memory") as twin:
            twin.load_model(blob)
            assert result.target.weights_crc() == twin.weights_crc()
    finally:
        result.target.close()
    # the RAM holds every segment as the ELF has it (read back through a new stub connection)
    check = GdbRemoteTarget("127.0.0.1", qemu.gdb_port)
    try:
        for seg in image.segments:
            assert check.read_memory(seg.address, len(seg.data)) == seg.data
    finally:
        check.close()


def test_second_load_of_the_same_build_is_skipped(image, qemu):
    stub = Stub(qemu.gdb_port)
    first = load(image, stub, open_board_port(qemu.uart_url, 115200), frequencies=(0,))
    first.target.close()
    again = load(image, stub, open_board_port(qemu.uart_url, 115200), frequencies=(0,))
    again.target.close()
    assert not first.skipped and again.skipped
    assert len(stub.connections) == 1  # the stub was not touched the second time
    assert again.info.boot_nonce == first.info.boot_nonce  # the same boot: nothing restarted


def test_cli_load_through_the_gdb_stub(image, qemu, capsys):
    argv = ["load", str(image.path), "--machine", "an547", "--gdb", f"127.0.0.1:{qemu.gdb_port}"]
    assert main([*argv, "--board", qemu.uart_url]) == 0
    out = capsys.readouterr().out
    assert f"loaded {image.load_bytes} bytes" in out and "hilbench-an547" in out
    assert main([*argv, "--board", qemu.uart_url]) == 0
    assert "nothing loaded" in capsys.readouterr().out


def test_no_stub_listening_is_one_line(image, capsys):
    argv = ["load", str(image.path), "--machine", "an547", "--gdb", f"127.0.0.1:{free_port()}"]
    from tests.board.conftest import TwinBoard

    board = TwinBoard()
    try:
        assert main([*argv, "--board", board.path]) == 2
    finally:
        board.close()
    err = capsys.readouterr().err.strip()
    assert (
        err.count("\n") == 0 and "cannot reach the GDB stub" in err and "Connection refused" in err
    )
