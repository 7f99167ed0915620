"""Upload progress: a ``DeviceClient``'s ``upload`` event tells the bytes the device
acknowledged, chunk by chunk, over a link paced to the board's 921,600 baud (the twin behind a
pty); the views show it (a bar on the live panel during setup, a line a period in plain
output); and a whole run over that link reports its uploads that way."""

from __future__ import annotations

import io
import itertools
import math
import time

import numpy as np
import pytest
from rich.console import Console

from hilbench import data as datasets
from hilbench import session
from hilbench.client.device_client import FRAME_OVERHEAD, DeviceClient
from hilbench.config import RunConfig
from hilbench.console import LiveView, PlainView, Progress, Transfer, fmt_bytes
from hilbench.device import DeviceTwin, ThreadedServer
from hilbench.link.paced import PacedPort
from hilbench.link.pty_pair import PtyPair
from hilbench.link.serial_port import open_port
from hilbench.protocol import data_blob

BAUD = 921_600  # the ST-LINK-V3 virtual COM port's rate (STM32N6570-DK)
SECONDS_PER_BYTE = 10 / BAUD  # 8N1


@pytest.fixture
def paced_target():
    """A DeviceClient on a pty paced to 921,600 baud, the twin answering on the far side."""
    pty = PtyPair()
    server = ThreadedServer(DeviceTwin(), pty.device_stream())
    target = DeviceClient(PacedPort(open_port(pty.path), BAUD), name="twin at 921600 baud")
    target.hello()
    yield target
    target.close()
    server.close()
    pty.close()


@pytest.fixture(scope="module")
def model_blob() -> bytes:
    config = RunConfig()
    return session.prepare_model(config, session.load_data(config)).blob


def recorder() -> tuple[list[tuple[int, int, float]], object]:
    calls: list[tuple[int, int, float]] = []
    return calls, lambda upload: calls.append((upload.done, upload.total, time.perf_counter()))


def check_progress(calls: list[tuple[int, int, float]], total: int, chunk: int) -> None:
    """Starts at 0, grows by at most a chunk, ends at the total, one call per chunk + 1, and
    never ahead of the line: acknowledged bytes had to cross it at 921,600 baud."""
    done = [d for d, _, _ in calls]
    assert [t for _, t, _ in calls] == [total] * len(calls)
    assert done[0] == 0 and done[-1] == total
    assert all(0 < b - a <= chunk for a, b in itertools.pairwise(done))
    assert len(calls) == math.ceil(total / chunk) + 1
    t0 = calls[0][2]
    for d, _, t in calls[1:]:
        assert t - t0 >= d * SECONDS_PER_BYTE, (d, t - t0)


def test_a_model_upload_reports_each_acknowledged_chunk(paced_target, model_blob):
    calls, on_upload = recorder()
    paced_target.events.upload.subscribe(on_upload)
    paced_target.load_model(model_blob)
    chunk = paced_target.info.max_payload - FRAME_OVERHEAD
    check_progress(calls, len(model_blob), chunk)
    assert len(calls) > 3  # several chunks: the test says something


def test_a_data_upload_reports_each_acknowledged_chunk(paced_target, model_blob):
    paced_target.load_model(model_blob)
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (400, 64), dtype=np.int8)  # 25.6 KB: ~0.3 s at 921,600 baud
    y = rng.integers(0, 10, 400).astype(np.uint8)
    calls, on_upload = recorder()
    paced_target.events.upload.subscribe(on_upload)
    assert paced_target.load_data(0, x, y, 10) == 400
    blob = data_blob.encode(x, y, 10)
    check_progress(calls, len(blob), paced_target.info.max_payload - FRAME_OVERHEAD)
    assert calls[-1][2] - calls[0][2] >= len(blob) * SECONDS_PER_BYTE  # >= 0.28 s


def test_only_acknowledged_bytes_count(model_blob):
    """A device that refuses the model (too large for its arena) acknowledges nothing."""
    from hilbench.errors import DeviceError

    arena = len(model_blob) // 2 // 16 * 16
    target = session.direct_target(DeviceTwin(arena_bytes=arena))
    calls, on_upload = recorder()
    target.events.upload.subscribe(on_upload)
    with pytest.raises(DeviceError, match="MODEL_TOO_LARGE"):
        target.load_model(model_blob)
    assert [(d, t) for d, t, _ in calls] == [(0, len(model_blob))]


def test_without_a_listener_nothing_is_called(paced_target, model_blob):
    assert not paced_target.events.upload  # no subscriber
    assert paced_target.load_model(model_blob) > 0  # and no callback to fail on


# ---------------------------------------------------------------- the views


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_transfer_says_bytes_share_rate_and_time_left():
    t = Transfer("uploading the model", 10_000, now=5.0)
    t.update(0, 10_000, now=5.0)
    assert t.describe() == "0 B of 9.8 KiB (0%)"  # no rate before there is one to measure
    t.update(4096, 10_000, now=6.0)
    assert t.rate == 4096 and round(t.time_left(), 3) == round(5904 / 4096, 3)
    assert t.describe() == "4.0 KiB of 9.8 KiB (41%), 4.0 KiB/s, 1 s left"
    assert fmt_bytes(3 * 1024 * 1024) == "3.00 MiB" and fmt_bytes(812) == "812 B"


def test_plain_output_gets_a_line_a_period_and_none_at_the_end():
    out: list[str] = []
    clock = Clock()
    view = PlainView(write=out.append, period=2.0, clock=clock)
    view.status("connecting")
    total = 100_000
    for done in range(0, total + 1, 500):  # 201 callbacks over 10 s
        clock.t = done / 10_000
        view.transfer("uploading the model", done, total)
    view.status("evaluating the initial weights")
    assert out[0] == "[hilbench] connecting"
    assert out[1] == "[hilbench] uploading the model (97.7 KiB)"  # at once: it begins
    shares = out[2:-1]
    assert len(shares) == 4  # at 2, 4, 6 and 8 s; the end (10 s) is the next phase's line
    assert (
        shares[0]
        == "[hilbench] uploading the model: 19.5 KiB of 97.7 KiB (20%), 9.8 KiB/s, 8 s left"
    )
    assert [s.split("(")[1].split("%")[0] for s in shares] == ["20", "40", "60", "80"]
    assert out[-1] == "[hilbench] evaluating the initial weights"


def test_the_live_panel_shows_the_upload_as_a_bar_until_training_starts():
    console = Console(file=io.StringIO(), width=100, height=40, color_system=None)
    view = LiveView(console)
    view.start("hilbench · mlp on digits")
    view.status("uploading the model (9.8 KiB)")
    view.transfer("uploading the model", 4096, 10_000)

    def lines() -> list[str]:
        return ["".join(s.text for s in line) for line in console.render_lines(view._render())]

    setup = lines()
    assert len(setup) == LiveView.HEIGHT
    assert setup[1].strip().startswith("uploading the model")
    bar = "█" * int(0.4096 * LiveView.BAR_WIDTH)
    assert setup[2].split() == [
        "41%",
        "4.0",
        "KiB",
        "of",
        "9.8",
        "KiB",
        bar + "░" * (24 - len(bar)),
    ]
    view.status("evaluating the initial weights")  # the next phase: no stale bar
    assert "KiB" not in lines()[2]
    view.transfer("uploading 1,438 training items", 0, 92_000)
    assert lines()[2].split()[:2] == ["0%", "0"]
    view.update(Progress(step=1, q=2, loss=2.3, forward_passes=4, budget=200))
    assert "4/200 forward passes" in lines()[2]  # training: the budget's bar
    view.finish()


# ---------------------------------------------------------------- a run


def test_a_run_over_a_921600_baud_link_reports_its_uploads(paced_target, tmp_path):
    out: list[str] = []
    view = PlainView(write=out.append, period=0.1)
    config = RunConfig(budget=40, trace=tmp_path / "t.h5", backend="board", port="paced")
    result = session.run(config, view=view, target=paced_target)
    assert result.steps > 0 and not paced_target.events.upload  # the run let go of it
    assert not paced_target.events.incident
    data = datasets.load("digits")
    items = f"{len(data.y_train):,} training items"
    lines = [line for line in out if line.startswith(f"[hilbench] uploading {items}:")]
    # ~92 KB at 921,600 baud: >= 1 s on the line, so several lines 0.1 s apart (and not one
    # per chunk: ~190 chunks)
    assert 5 <= len(lines) <= 30, out
    shares = [int(line.split("(")[1].split("%")[0]) for line in lines]
    assert shares == sorted(shares) and shares[-1] < 100
    totals = {line.split(" of ")[1].split(" (")[0] for line in lines}
    assert len(totals) == 1  # one upload, one total
    assert f"[hilbench] uploading {items} (" in "\n".join(out)


def test_a_run_whose_upload_fails_lets_go_of_the_target(model_blob, tmp_path):
    """A device that refuses the model: the run fails, and the target (a pytest session's,
    used again by the next test) no longer reports to this run's view."""
    from hilbench.errors import DeviceError

    target = session.direct_target(DeviceTwin(arena_bytes=len(model_blob) // 2 // 16 * 16))
    out: list[str] = []
    with pytest.raises(DeviceError, match="MODEL_TOO_LARGE"):
        session.run(RunConfig(trace=tmp_path / "t.h5"), view=PlainView(out.append), target=target)
    assert not target.events.upload and not target.events.incident
    assert out[-1].startswith("[hilbench] uploading the model (")
