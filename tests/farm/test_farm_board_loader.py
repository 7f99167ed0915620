"""END TO END: a farm board loaded through the board loader (loader kind ``pyocd``).

The board is QEMU's MPS3 AN547 (a Cortex-M55) started halted with no image: its GDB stub stands
for the ``pyocd gdbserver`` an exporter runs per probe, its UART on a TCP port for the
exporter's ``NetworkSerialPort``. A real labgrid coordinator and exporter publish it as a
place; ``hilbench run --board labgrid:PLACE`` (RunConfig) acquires it, the farm's loader
writes the an547 ELF (make -C device_fw an547) through the same hilbench.board.loader.load a
local board uses, and the run ends with the twin's weights. Nothing is a stand-in but QEMU for
the DK, and QEMU runs the real image.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.needs import need_module, need_tool

need_module("labgrid", "pip install -e '.[farm]' (the dev extra includes it)")

from hilbench import session  # noqa: E402
from hilbench.backend.emulate import EmulatorBackend  # noqa: E402
from hilbench.backend.labgrid import LabgridBackend  # noqa: E402
from hilbench.backend.map import MapBackend  # noqa: E402
from hilbench.board import elfimage, gdbremote  # noqa: E402
from hilbench.board.elfimage import FirmwareImage  # noqa: E402
from hilbench.cli import main  # noqa: E402
from hilbench.config import RunConfig  # noqa: E402
from hilbench.farm.lab import LabPlace, LocalFarm  # noqa: E402
from hilbench.launch.qemu import firmware_elf  # noqa: E402
from hilbench.npu import zoo  # noqa: E402
from hilbench.npu.blob import to_blob  # noqa: E402
from hilbench.trace import Trace  # noqa: E402
from hilbench.zo import zocf  # noqa: E402
from hilbench.zo.loss import LossTables  # noqa: E402
from tests.board.qemu_stub import HaltedQemu, free_port  # noqa: E402
from tests.farm.conftest import held  # noqa: E402

PLACE = "n6-qemu"
PROBE = "QEMU-AN547-0"
BUDGET = 100


@pytest.fixture(scope="module")
def image() -> FirmwareImage:
    need_tool("qemu-system-arm", "apt install qemu-system-arm")
    return elfimage.read_image(firmware_elf(), elfimage.AN547)  # make -C device_fw an547


def halted_qemu(image: FirmwareImage) -> HaltedQemu:
    """QEMU halted on its GDB stub, no image; its firmware string carries the ELF's build."""
    return HaltedQemu(firmware=f"hilbench-an547 build {image.image_id}")


@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory) -> session.RunResult:
    """The twin's run of the same configuration (the reference for the weights)."""
    trace = tmp_path_factory.mktemp("twin") / "twin.h5"
    return session.run(RunConfig(budget=BUDGET, seed=2, trace=trace, live=False))


class Connections:
    """Counts the GDB stub connections the loader opens (the real client, counted)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: list[str] = []
        real = gdbremote.GdbRemoteTarget
        opened = self.opened

        class Counted(real):  # type: ignore[misc, valid-type]
            def __init__(self, host: str, port: int, **kw: float) -> None:
                opened.append(f"{host}:{port}")
                super().__init__(host, port, **kw)

        monkeypatch.setattr(gdbremote, "GdbRemoteTarget", Counted)


@pytest.fixture
def farm(tmp_path: Path, image: FirmwareImage, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """A coordinator and one exporter publishing the halted QEMU as place n6-qemu."""
    qemu = halted_qemu(image)
    try:
        device = {
            "kind": "pyocd",
            "probe": PROBE,
            "host": "127.0.0.1",
            "gdb": f"127.0.0.1:{qemu.gdb_port}",  # the exporter's `pyocd gdbserver`
            "machine": "an547",
            "image": str(image.path),
        }
        place = LabPlace(PLACE, "given", port=qemu.uart_port, tags={"board": "an547"})
        place.device = device
        with LocalFarm(tmp_path / "farm", [place], exporters=1) as lab:
            monkeypatch.setenv("LG_COORDINATOR", lab.address)
            yield lab, qemu
    finally:
        qemu.stop()
    assert qemu.proc.poll() is not None  # QEMU does not outlive the test


def test_a_farm_place_is_loaded_through_the_board_loader_runs_and_is_not_loaded_twice(
    farm, image, emulated, tmp_path, monkeypatch
):
    lab, qemu = farm
    stub = Connections(monkeypatch)
    config = RunConfig(
        backend="board", port=f"labgrid:{PLACE}", budget=BUDGET, seed=2,
        trace=tmp_path / "farm.h5", live=False,
    )  # fmt: skip
    result = session.run(config)
    assert stub.opened == [f"127.0.0.1:{qemu.gdb_port}"]  # loaded once, through the stub
    assert result.steps >= 10  # trained: the weights moved
    assert result.weights_crc == emulated.weights_crc  # the firmware in QEMU = the twin
    assert result.final_accuracy == emulated.final_accuracy
    attrs = Trace.open(result.trace_path, result.run_id).attrs
    assert (attrs["place"], attrs["probe_id"]) == (PLACE, PROBE)
    assert attrs["exporter_host"] == "exp0"
    assert attrs["firmware_hash"] == f"build-id:{image.image_id}"
    assert attrs["firmware"] == f"hilbench-an547 build {image.image_id}"
    assert attrs["serial_url"] == f"socket://127.0.0.1:{qemu.uart_port}"
    assert held(lab.address) == {}

    # the next client acquires the place and finds the build running: nothing is loaded
    again = LabgridBackend(f"labgrid:{PLACE}")
    try:
        target = again.open().client
        loaded = again.strategy.loader.loaded
        assert "already runs build" in loaded.detail and "nothing loaded" in loaded.detail
        assert loaded.firmware_hash == f"build-id:{image.image_id}"
        assert again.location["firmware_hash"] == f"build-id:{image.image_id}"
        assert target.info.firmware == f"hilbench-an547 build {image.image_id}"
    finally:
        again.close()
    assert stub.opened == [f"127.0.0.1:{qemu.gdb_port}"]  # the stub was not touched again
    assert held(lab.address) == {}
    assert qemu.proc.poll() is None  # releasing the place left the board running


def write_map(path: Path, uart: int, gdb: str, image: FirmwareImage, **extra: str) -> Path:
    lines = [
        f"[boards.{PLACE}]",
        f'port = "socket://127.0.0.1:{uart}"',
        f'probe = "{PROBE}"',
        'kind = "pyocd"',
        f'gdb = "{gdb}"',
        'machine = "an547"',
        f'image = "{image.path}"',
        *(f'{key} = "{value}"' for key, value in extra.items()),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def mlp_blob() -> bytes:
    g = zoo.build("mlp", seed=2)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    return to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": zocf.build(g).to_bytes()})


def test_a_board_map_board_of_kind_pyocd_loads_through_its_gdb_stub(image, tmp_path, monkeypatch):
    monkeypatch.setenv("HILBENCH_LOCK_DIR", str(tmp_path / "locks"))
    qemu = halted_qemu(image)
    try:
        stub = Connections(monkeypatch)
        gdb = f"127.0.0.1:{qemu.gdb_port}"
        boards = write_map(tmp_path / "boards.toml", qemu.uart_port, gdb, image)
        first = MapBackend(f"map:{boards}")
        try:
            target = first.open().client
            assert stub.opened == [gdb]
            assert first.loaded.detail.startswith(f"place {PLACE} (probe {PROBE} via the GDB stub")
            assert f"loaded {image.load_bytes} bytes of {image.path.name}" in first.loaded.detail
            assert first.location["firmware_hash"] == f"build-id:{image.image_id}"
            assert target.info.device_id == "hilbench-an547"
            # the firmware works past HELLO: a model's weights CRC is the twin's
            blob = mlp_blob()
            target.load_model(blob)
            with EmulatorBackend(link="memory") as twin:
                twin.load_model(blob)
                assert target.weights_crc() == twin.weights_crc()
        finally:
            first.close()
        again = MapBackend(f"map:{boards}")
        try:
            again.open()
            assert "nothing loaded" in again.loaded.detail
            assert again.location["firmware_hash"] == f"build-id:{image.image_id}"
        finally:
            again.close()
        assert stub.opened == [gdb]  # the second lock of the board did not load it
    finally:
        qemu.stop()
    assert qemu.proc.poll() is not None


def refused_run(boards: Path, tmp_path: Path) -> None:
    """``hilbench run`` on the place of a boards map: refused (exit 2)."""
    argv = ["run", "--board", f"map:{boards}", "--budget", "10", "--no-live"]
    assert main([*argv, "--trace", str(tmp_path / "t.h5")]) == 2


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The error the run printed: one line."""
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


def test_no_stub_listening_is_one_line_naming_the_stub(image, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HILBENCH_LOCK_DIR", str(tmp_path / "locks"))
    qemu = halted_qemu(image)  # its UART answers nothing (halted); no stub at the given port
    try:
        gdb = f"127.0.0.1:{free_port()}"
        boards = write_map(tmp_path / "boards.toml", qemu.uart_port, gdb, image)
        refused_run(boards, tmp_path)
    finally:
        qemu.stop()
    err = one_line(capsys)
    assert f"place {PLACE}: cannot reach the GDB stub {gdb}: Connection refused" in err
    assert f"pyocd gdbserver --uid {PROBE} --port {gdb.rsplit(':')[1]}" in err


def test_no_pyocd_server_listening_is_one_line(image):
    from hilbench.errors import HilbenchError
    from hilbench.farm.loaders import LoadContext, load

    qemu = halted_qemu(image)  # a serial port that answers nothing yet
    try:
        server = f"127.0.0.1:{free_port()}"
        params = {"pyocd_server": server, "machine": "an547"}
        ctx = LoadContext(PLACE, "exp0", "127.0.0.1", PROBE, "127.0.0.1", qemu.uart_port,
                          str(image.path), params)  # fmt: skip
        with pytest.raises(HilbenchError) as caught:
            load("pyocd", ctx)
    finally:
        qemu.stop()
    message = str(caught.value)
    assert f"cannot reach the pyocd server at {server} (Connection refused)" in message
    assert f"pyocd server --uid {PROBE} --port {server.rsplit(':')[1]}" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"machine": "esp32"}, "names machine 'esp32'. use one of stm32n6, an547"),
        ({"gdb": "benchpc:x"}, "gdb 'benchpc:x' is not HOST:PORT"),
        ({"pyocd_server": "benchpc:5555"}, "gives both gdb and pyocd_server"),
    ],
)
def test_bad_pyocd_settings_are_one_line(image, tmp_path, monkeypatch, capsys, settings, expected):
    monkeypatch.setenv("HILBENCH_LOCK_DIR", str(tmp_path / "locks"))
    extra = dict(settings)
    gdb = extra.pop("gdb", "127.0.0.1:1")
    boards = write_map(tmp_path / "boards.toml", free_port(), gdb, image)
    text = boards.read_text()
    for key, value in extra.items():
        text = text.replace('machine = "an547"\n', "") if key == "machine" else text
        text += f'{key} = "{value}"\n'
    boards.write_text(text)
    refused_run(boards, tmp_path)
    err = one_line(capsys)
    assert expected in err, err


def test_a_probe_on_another_host_without_a_stub_names_the_gdbserver_to_run():
    from hilbench.errors import ConfigError
    from hilbench.farm.loaders import LoadContext, load

    ctx = LoadContext(PLACE, "benchpc", "benchpc", "003A0028", "benchpc", 20001, "")
    with pytest.raises(ConfigError) as caught:
        load("pyocd", ctx)
    message = str(caught.value)
    assert "probe 003A0028 hangs on benchpc" in message and "\n" not in message
    assert "pyocd gdbserver --uid 003A0028 --port 3333" in message
    assert "gdb: benchpc:3333" in message


def test_a_firmware_not_naming_the_loaded_build_is_one_line(image, tmp_path, monkeypatch, capsys):
    """The stub loads the ELF, and HELLO then names another build (the place's serial port
    and debugger belong to different boards, or a foreign firmware): said, not recorded."""
    monkeypatch.setenv("HILBENCH_LOCK_DIR", str(tmp_path / "locks"))
    qemu = HaltedQemu(firmware="hilbench-an547 build 0123456789abcdef")
    try:
        gdb = f"127.0.0.1:{qemu.gdb_port}"
        boards = write_map(tmp_path / "boards.toml", qemu.uart_port, gdb, image)
        refused_run(boards, tmp_path)
    finally:
        qemu.stop()
    err = one_line(capsys)
    assert f"loaded build {image.image_id} of {image.path.name}" in err
    assert "says 'hilbench-an547 build 0123456789abcdef'" in err


def test_a_local_probe_that_is_not_attached_is_one_line(image):
    """No gdb, no pyocd_server, the probe on this host: pyOCD itself looks for it (no
    ST-LINK is attached here)."""
    from hilbench.errors import HilbenchError
    from hilbench.farm.loaders import LoadContext, load

    qemu = halted_qemu(image)  # a serial port that answers nothing yet
    try:
        ctx = LoadContext(PLACE, "exp0", "127.0.0.1", "NOSUCHPROBE0", "127.0.0.1",
                          qemu.uart_port, str(image.path), {"machine": "an547"})  # fmt: skip
        with pytest.raises(HilbenchError) as caught:
            load("pyocd", ctx)
    finally:
        qemu.stop()
    assert str(caught.value) == (
        "no debug probe with id 'NOSUCHPROBE0'. see `hilbench probe list` for the probes attached"
    )
