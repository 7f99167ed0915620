"""The board's lifecycle (absent -> loaded -> ready -> model loaded -> training): the moves a
Lifecycle allows, what it logs and reports; then pytest runs of the plugin's own fixtures on
the stand-in probe with the twin as the firmware (a pytester subprocess): each move a timed
line in the test's log, and a failing test's report naming the board (probe id), its stage and
its UART tail."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from hilbench.board.lifecycle import Lifecycle, Stage, describe_tail

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_moves_go_up_one_stage_at_a_time_and_back_anywhere(caplog):
    clock = Clock()
    life = Lifecycle("/dev/ttyACM0, probe 003A0029", clock=clock)
    with caplog.at_level(logging.INFO, logger="hilbench.board"):
        with life.moving_to(Stage.LOADED) as move:
            clock.t += 1.25
            move.detail = "build abc, 4096 bytes"
        clock.t += 0.5
        life.enter(Stage.READY)  # by default: the time since the last move
        with pytest.raises(ValueError, match="cannot go from ready to training"):
            life.enter(Stage.TRAINING, 0.0)
        work = []
        with pytest.raises(ValueError), life.moving_to(Stage.TRAINING):
            work.append(1)  # refused before it starts
        assert not work and life.stage is Stage.READY
        life.enter(Stage.MODEL_LOADED, 2.0)
        life.enter(Stage.MODEL_LOADED, 1.0, "another model")  # a reload stays there
        life.enter(Stage.ABSENT, 0.01, "closed")
    assert life.stage is Stage.ABSENT
    assert [str(m) for m in life.transitions] == [
        "absent -> loaded in 1.250 s (build abc, 4096 bytes)",
        "loaded -> ready in 0.500 s",
        "ready -> model loaded in 2.000 s",
        "model loaded -> model loaded in 1.000 s (another model)",
        "model loaded -> absent in 0.010 s (closed)",
    ]
    assert [r.getMessage() for r in caplog.records] == [
        f"/dev/ttyACM0, probe 003A0029: {m}" for m in life.transitions
    ]


def test_a_move_that_fails_keeps_the_stage_and_says_why(caplog):
    clock = Clock()
    life = Lifecycle("board", clock=clock, tail=lambda: b"\x00\x07\x01\x02\x00FAULT hard\r\n")
    life.enter(Stage.LOADED, 1.0)
    life.enter(Stage.READY, 0.1)
    with (
        caplog.at_level(logging.INFO, logger="hilbench.board"),
        pytest.raises(RuntimeError),
        life.moving_to(Stage.MODEL_LOADED),
    ):
        clock.t += 4.5
        raise RuntimeError("no answer from board to LOAD_MODEL\nsecond line")
    assert life.stage is Stage.READY
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    failed = "ready -> model loaded failed after 4.500 s: no answer from board to LOAD_MODEL"
    assert record.getMessage() == f"board: {failed}"
    assert dict(life.report()) == {
        "board": "board",
        "stage": "ready (for 4.5 s)",
        "failed": failed,
        "moves": "absent -> loaded in 1.000 s; loaded -> ready in 0.100 s",
        "uart tail": "5 bytes of frames, then 'FAULT hard\\r\\n'",
    }


def test_the_report_keeps_the_last_six_moves():
    life = Lifecycle("b", clock=Clock())
    life.enter(Stage.LOADED, 0.0)
    life.enter(Stage.READY, 0.0)
    for _ in range(5):
        life.enter(Stage.MODEL_LOADED, 0.0)
        life.enter(Stage.TRAINING, 0.0)
    moves = dict(life.report())["moves"]
    assert moves.startswith("... 6 earlier; ") and moves.count(" -> ") == 6
    assert "uart tail" not in dict(life.report())  # no port to read one from


def test_the_uart_tail_reads_as_text_frames_or_both():
    assert describe_tail(b"") == "nothing"
    assert describe_tail(b"boot ROM: no image\r\n") == "'boot ROM: no image\\r\\n'"
    frames = bytes(range(0x80, 0xC0))
    assert describe_tail(frames) == frames[-64:].hex(" ")
    assert describe_tail(frames + b"ok\r\n") == (frames + b"ok\r\n")[-64:].hex(" ")  # too short
    # bytes above 0x7f are not text (decoded they would be printable U+FFFD)
    assert (
        describe_tail(frames + b"HardFault PC=0x3400")
        == "64 bytes of frames, then 'HardFault PC=0x3400'"
    )


# ---------------------------------------------------------------- in a pytest run

CONFTEST = '''
"""The plugin's board backend on a pty with the twin as the firmware once the STAND-IN probe
resumes the core (tests/board/standin.py); only make_backend is replaced, to pass the
stand-in's connect."""
import os

import pytest

from hilbench import pytest_plugin
from hilbench.board import elfimage
from hilbench.backend.board import BoardBackend
from hilbench.board.pyocd_target import PyocdTarget
from hilbench.protocol.spec import PROTOCOL_VERSION
from tests.board.conftest import TwinBoard
from tests.board.standin import RecordingCortexM

ELF = os.environ["HB_STM32N6_ELF"]
IMAGE = elfimage.read_image(ELF)
BOARD = TwinBoard()


def resume():
    if os.environ.get("HB_FIRMWARE_SILENT"):
        BOARD.say(b"boot ROM: no image\\r\\n")
    else:
        BOARD.start(f"hilbench-stm32n6 protocol {PROTOCOL_VERSION} build {IMAGE.image_id}")


def connect(probe_id, hz):
    cortex = RecordingCortexM((0x34000000, 0x34200000))
    cortex.resume = resume
    return PyocdTarget(cortex, name=probe_id)


pytest_plugin.make_backend = lambda config: BoardBackend(
    BOARD.path, firmware=ELF, probe="STANDIN0042", connect=connect
)


@pytest.fixture
def firmware_crashes():
    def crash(report):
        for server in BOARD.servers:
            server.close()
        BOARD.say(report)

    return crash
'''

TESTS = """
def test_trains(zo_session):
    assert zo_session(budget=200, scheduler="fixed:2").result.steps == 50


def test_the_board_faults(zo_session, device, firmware_crashes):
    zo_session(budget=200, scheduler="fixed:2")
    firmware_crashes(b"HardFault: PC=0x34001a2c LR=0xfffffffd\\r\\n")
    device.hello(timeout=0.3, retries=1)
"""

MOVE = re.compile(r"probe STANDIN0042: (.+?) -> (.+?) in (\d+\.\d{3}) s")


def board_section(text: str) -> dict[str, str]:
    """The rows of the one "---- hilbench board ----" section of a pytest report."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if re.fullmatch(r"-+ hilbench board -+", line)]
    assert len(starts) == 1, text
    rows = {}
    for line in lines[starts[0] + 1 :]:
        label = line[:10].rstrip()
        if label not in ("board", "stage", "failed", "moves", "uart tail"):
            break
        rows[label] = line[10:]
    return rows


def log_section(text: str, when: str) -> str:
    """The lines of pytest's "Captured log <when>" section."""
    after = text.split(f" Captured log {when} ", 1)[1].split("\n", 1)[1]
    return re.split(r"\n-{4,} ", after, maxsplit=1)[0]


def run_pytest(pytester, monkeypatch, elf: Path, *args: str):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("HB_STM32N6_ELF", str(elf))
    pytester.makeconftest(CONFTEST)
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--board=STANDIN0042", "--no-live", *args
    )


def test_each_move_is_a_timed_line_and_a_failure_names_the_board(
    pytester, monkeypatch, stm32n6_elf
):
    pytester.makepyfile(test_sample=TESTS)
    result = run_pytest(pytester, monkeypatch, stm32n6_elf)
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()

    rows = board_section(text)
    assert rows["board"].endswith(", probe STANDIN0042") and rows["board"].startswith("/dev/")
    assert re.fullmatch(r"model loaded \(for \d+\.\d s\)", rows["stage"])
    assert "failed" not in rows  # the test failed, not a move
    assert rows["uart tail"].endswith(" bytes of frames, then 'HardFault: PC=0x34001a2c "
                                      "LR=0xfffffffd\\r\\n'")  # fmt: skip
    assert re.search(
        r"; training -> model loaded in \d+\.\d{3} s \(the run ended\)$", rows["moves"]
    )

    # the failing test's own log: its run's three moves, each timed; nothing printed
    moves = MOVE.findall(log_section(text, "call"))
    assert [(a, b) for a, b, _ in moves] == [
        ("model loaded", "model loaded"),  # the first test's model is replaced
        ("model loaded", "training"),
        ("training", "model loaded"),
    ]
    assert float(moves[0][2]) > 0 and float(moves[2][2]) > 0  # uploads and training take time
    assert "Captured stdout" not in text and "uploading" not in text
    # the way up was the first (passing) test's setup, not shown; closing is this one's
    assert "absent -> loaded" not in text
    assert MOVE.findall(log_section(text, "teardown"))[0][:2] == ("model loaded", "absent")


def test_a_firmware_that_never_answers_fails_setup_naming_the_board_and_its_tail(
    pytester, monkeypatch, stm32n6_elf
):
    monkeypatch.setenv("HB_FIRMWARE_SILENT", "1")
    pytester.makepyfile(test_sample="def test_device_answers(device):\n    assert device\n")
    result = run_pytest(pytester, monkeypatch, stm32n6_elf)
    result.assert_outcomes(errors=1)
    text = result.stdout.str()
    rows = board_section(text)
    assert rows["board"].endswith(", probe STANDIN0042")
    assert re.fullmatch(r"absent \(for \d+\.\d s\)", rows["stage"])
    assert re.match(r"absent -> loaded failed after \d+\.\d{3} s: .*did not answer HELLO",
                    rows["failed"])  # fmt: skip
    assert rows["uart tail"] == "'boot ROM: no image\\r\\n'"
    assert "moves" not in rows
    # the loader's steps up to the failure are in the setup log, each timed
    setup_log = log_section(text, "setup")
    for step in ("find the board", "open its port", "halt", "resume"):
        assert re.search(rf"STANDIN0042: {step}[^\n]* \(\d+\.\d{{3}} s\)", setup_log), step
