"""--board as the backends and the pytest plugin take it: a physical board (auto, a probe serial,
an ST-LINK's port, any port with --fw) goes to the loader's backend; a pty or a socket:// URL
stays a plain serial link. Without a board here: the refusals, one line, and the plain path on
a pty with the twin behind it."""

from __future__ import annotations

from hilbench.backend.board import BoardBackend, wants_board_backend
from hilbench.backend.registry import make_backend
from hilbench.backend.serial import SerialBackend
from hilbench.config import RunConfig
from hilbench.errors import HilbenchError, LinkError

SAMPLE = """
def test_device_answers(device):
    assert device.hello().device_id
"""


def test_which_board_specs_go_to_the_loader(twin_board):
    assert wants_board_backend("auto") and wants_board_backend("003A00293433510F37363934")
    assert not wants_board_backend("socket://127.0.0.1:5555")
    assert not wants_board_backend(twin_board.path)  # a pty: no ST-LINK behind it
    assert wants_board_backend(twin_board.path, firmware="fw.elf")
    assert not wants_board_backend("  ")
    assert isinstance(make_backend(RunConfig(backend="board", port="auto")), BoardBackend)
    plain = make_backend(RunConfig(backend="board", port=twin_board.path))
    assert isinstance(plain, SerialBackend)


def test_auto_without_a_board_is_one_line():
    backend = BoardBackend("auto")
    try:
        backend.open()
    except LinkError as exc:
        assert "no board attached" in str(exc) and "\n" not in str(exc)
    else:
        raise AssertionError("opened a board that is not there")


def test_a_port_without_a_probe_is_a_plain_link(twin_board):
    twin_board.start("hilbench-twin standing in")
    backend = BoardBackend(twin_board.path, firmware="never-read.elf")
    try:
        connection = backend.open()
        assert connection.client.info.firmware == "hilbench-twin standing in"
        assert backend.loaded is None and backend.board.probe_id is None
        assert connection.loaded is None and connection.lifecycle is backend.lifecycle
        assert connection.location == {
            "probe_id": "",
            "firmware_hash": "",
            "serial_url": twin_board.path,
        }
    finally:
        backend.close()


def test_pytest_board_auto_without_a_board_fails_in_one_line(pytester):
    pytester.makepyfile(SAMPLE)
    result = pytester.runpytest_subprocess("--board=auto", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*hilbench: --board auto: no board attached*0483:3754*"])


def test_a_run_loads_the_board_and_names_it_in_the_trace(stm32n6_elf, twin_board, tmp_path, caplog):
    """The whole way from absent to training: the pty is the board's port, the recording
    stand-in of pyOCD's target its probe, the twin the firmware once the core resumes."""
    import logging

    from hilbench import session
    from hilbench.board import elfimage
    from hilbench.board.loader import CHUNK_BYTES
    from hilbench.board.pyocd_target import PyocdTarget
    from hilbench.console import PlainView, fmt_bytes
    from hilbench.protocol.spec import PROTOCOL_VERSION
    from hilbench.trace import Trace
    from tests.board.standin import RecordingCortexM

    image = elfimage.read_image(stm32n6_elf)
    standins: list[RecordingCortexM] = []

    def connect(probe_id: str, hz: int) -> PyocdTarget:
        cortex = RecordingCortexM((0x34000000, 0x34200000))
        firmware = f"hilbench-stm32n6 protocol {PROTOCOL_VERSION} build {image.image_id}"
        cortex.resume = lambda: twin_board.start(firmware)  # the core runs: the firmware answers
        standins.append(cortex)
        return PyocdTarget(cortex, name=probe_id)

    backend = BoardBackend(
        twin_board.path, firmware=str(stm32n6_elf), probe="STANDIN0042", connect=connect
    )
    config = RunConfig(backend="board", port=twin_board.path, budget=200, trace=tmp_path / "t.h5")
    out: list[str] = []
    view = PlainView(write=out.append, period=0.0)
    with caplog.at_level(logging.INFO, logger="hilbench.board"):
        result = session.run(config.replace(live=False), backend=backend, view=view)
    # the firmware's load shows as a transfer, before the model's upload
    loading = [line for line in out if "loading the firmware" in line]
    assert loading[0] == f"[hilbench] loading the firmware ({fmt_bytes(image.load_bytes)})"
    # a line a 4 KiB write of a segment (the ITCM code is a segment of its own), but the last
    assert len(loading) == sum(-(-len(s.data) // CHUNK_BYTES) for s in image.segments)
    model = next(i for i, line in enumerate(out) if line.startswith("[hilbench] uploading the"))
    assert out.index(loading[-1]) < model
    attrs = Trace.open(result.trace_path, result.run_id).attrs
    assert attrs["probe_id"] == "STANDIN0042" and attrs["serial_url"] == twin_board.path
    assert attrs["firmware_hash"] == f"build-id:{image.image_id}"
    assert backend.loaded is True and len(standins) == 1
    steps = [name for name, _ in backend.steps]
    assert steps[:3] == ["find the board", "open its port", "check running firmware"]
    assert steps[-3:] == ["set VTOR, core reset", "resume", "wait for HELLO"]
    moves = backend.lifecycle.transitions
    assert [(m.before.value, m.after.value) for m in moves] == [
        ("absent", "loaded"),
        ("loaded", "ready"),
        ("ready", "model loaded"),
        ("model loaded", "training"),
        ("training", "model loaded"),
        ("model loaded", "absent"),
    ]
    # "loaded" times the whole way there: every step the loader logged happened inside it
    assert moves[0].seconds >= sum(seconds for _, seconds in backend.steps)
    assert moves[0].detail == f"build {image.image_id}, {image.load_bytes} bytes"
    assert 0 < moves[2].seconds + moves[4].seconds < result.wall_s  # uploads; training
    logged = [r.getMessage() for r in caplog.records if r.name == "hilbench.board"]
    assert len(logged) == len(steps) + len(moves)
    assert all("probe STANDIN0042" in line for line in logged[1:])
    assert [line.split(": ", 1)[1] for line in logged[len(steps) :]] == [str(m) for m in moves]


def test_pre_and_post_hooks_run_around_the_board(twin_board, tmp_path, monkeypatch):
    log = tmp_path / "hooks.txt"
    monkeypatch.setenv("HILBENCH_BOARD_PRE", f"echo pre {{port}} >> {log}")
    monkeypatch.setenv("HILBENCH_BOARD_POST", f"echo post {{port}} >> {log}")
    twin_board.start("hilbench-twin standing in")
    backend = BoardBackend(twin_board.path, firmware="never-read.elf")
    backend.open()
    assert log.read_text() == f"pre {twin_board.path}\n"
    backend.close()
    assert log.read_text() == f"pre {twin_board.path}\npost {twin_board.path}\n"
    assert [n for n, _ in backend.steps][:2] == ["find the board", "HILBENCH_BOARD_PRE hook"]


def test_a_failing_hook_is_one_line_and_the_port_stays_closed(twin_board, monkeypatch):
    monkeypatch.setenv("HILBENCH_BOARD_PRE", "echo 'relay 2: no such port' >&2; exit 3")
    backend = BoardBackend(twin_board.path, firmware="never-read.elf")
    try:
        backend.open()
    except HilbenchError as exc:
        text = str(exc)
    else:
        raise AssertionError("a failing hook was ignored")
    assert "HILBENCH_BOARD_PRE failed (exit 3)" in text and "relay 2: no such port" in text
    assert "\n" not in text and backend.target is None
