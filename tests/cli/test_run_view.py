"""The run's live view is as informative as `watch` (issue 14): rates and time left, events,
a loss sparkline, the setup phases, narrow terminals; and a lost console never ends a run."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from hilbench.console import LiveView, PlainView, Progress, Tracker, fmt_duration

TITLE = "hilbench · mlp on digits · fixed:4 · emulate · hilbench-twin · NPU native avx2"


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def progress(step: int) -> Progress:
    return Progress(
        step=step,
        q=4,
        loss=2.3 - 0.001 * step,
        accuracy=0.875,
        forward_passes=8 * step,
        budget=8_000,
        step_host_s=0.0015,
        step_device_s=3.1e-5,
        device_source="modeled",
        accuracy_forward_passes=4_000,
    )


def panel(width: int, steps: int = 600, events: dict[str, int] | None = None) -> list[str]:
    """The panel's lines after ``steps`` steps at 200 steps/s."""
    console = Console(file=io.StringIO(), width=width, height=40, color_system=None)
    view = LiveView(console)
    clock = Clock()
    view._tracker = Tracker(clock)
    view.start(TITLE)
    for kind, n in (events or {}).items():
        for _ in range(n):
            view.event(kind, "detail")
    for step in range(1, steps + 1):
        clock.t = step / 200
        view.update(progress(step))
    return [
        "".join(seg.text for seg in line).rstrip()
        for line in console.render_lines(view._render(), pad=False)
    ]


def test_the_panel_shows_rate_time_left_events_and_a_sparkline():
    lines = panel(100, events={"retry": 2, "reset": 1, "recovered": 1, "injected": 7})
    text = "\n".join(lines)
    assert lines[0] == TITLE
    assert "step 600" in text and "loss 1.7000" in text and "test acc 87.5%" in text
    assert "4,800/8,000 forward passes" in text and "60%" in text
    assert "200 steps/s" in text
    assert "2 s left" in text  # 3,200 passes at 1,600 passes/s
    assert "step 1.50 ms host" in text and "31.0 µs modeled" in text
    assert "events: retry 2, reset 1, recovered 1, injected 7" in text
    assert any(ch in text for ch in "▁▂▃▄▅▆▇█")  # the loss sparkline


@pytest.mark.parametrize("width", [100, 60, 40, 30])
def test_a_narrow_terminal_keeps_the_key_numbers_and_the_height(width):
    lines = panel(width, events={"retry": 1})
    assert len(lines) == LiveView.HEIGHT  # never wraps: the height stays what start() measured
    assert all(len(line) <= width for line in lines)
    text = "\n".join(lines)
    for key in ("step 600", "loss 1.7000", "acc 87.5%", "60%", "left", "retry 1"):
        assert key in text, (width, text)


def test_the_first_seconds_say_what_is_happening():
    console = Console(file=io.StringIO(), width=100, height=40, color_system=None)
    view = LiveView(console)
    view.start(TITLE)
    view.status("uploading the model: 4.0 KiB of 9.7 KiB (41%)")
    lines = ["".join(s.text for s in line) for line in console.render_lines(view._render())]
    assert "uploading the model: 4.0 KiB of 9.7 KiB (41%)" in lines[1]
    assert len(lines) == LiveView.HEIGHT


def test_plain_lines_carry_the_same_figures_and_one_line_per_setup_phase():
    out: list[str] = []
    view = PlainView(write=out.append, period=0.0, width=200, clock=Clock())
    view.start(TITLE)
    for pct in (10, 50, 100):
        view.status(f"uploading the model: {pct}%")
    view.status("evaluating the initial weights")
    view.event("retry", "x")
    clock = view.clock  # the view's clock: its tracker's too
    for step in range(1, 301):
        clock.t = step / 100
        view.update(progress(step))
    assert out[1] == "[hilbench] uploading the model: 10%"  # the later shares: one per period
    assert "[hilbench] evaluating the initial weights" in out
    last = out[-1]
    assert "100 steps/s" in last and "left" in last and "events: retry 1" in last


def test_plain_lines_fit_80_columns_and_wrap_between_fields_only():
    out: list[str] = []
    view = PlainView(write=out.append, period=0.0, width=80, clock=Clock())
    view.start(TITLE)
    view.status(
        "connected to hilbench-twin (firmware hilbench-twin 0.1.0, protocol 1); 600 MHz, "
        "caches off, arena 4,194,304 B, no watchdog, UART errors 0/0/0/0"
    )
    view.event("retry", "x")
    clock = view.clock  # the view's clock: its tracker's too
    for step in range(1, 12_346):
        clock.t = step / 100
        p = progress(step)
        p.forward_passes, p.budget, p.timing_model = 8 * step, 1_000_000_000, "m55@600MHz"
        view.update(p)
    assert out and max(len(line) for line in out) <= 80
    assert all(line.startswith("[hilbench] ") for line in out)
    starts = [i for i, line in enumerate(out) if line.startswith("[hilbench] step ")]
    last = " ".join(line.removeprefix("[hilbench]   ") for line in out[starts[-1] :])
    assert len(out) - starts[-1] >= 2  # it did not fit one line: it went on
    # every field whole: no number or unit cut at the line's end
    assert "fwd 98760/1000000000 (0%)" in last
    assert "device 31.0 µs (modeled: m55@600MHz)" in last
    assert "events: retry 1" in last
    joined = " ".join(line.removeprefix("[hilbench]   ") for line in out[1:4])
    assert "arena 4,194,304 B" in joined and "protocol 1);" in joined


def test_a_closed_pipe_silences_the_view_and_the_run_goes_on(monkeypatch):
    detached = []
    monkeypatch.setattr("hilbench.console.detach_stdout", lambda: detached.append(True))

    def broken(line: str) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    view = PlainView(write=broken, period=0.0)
    view.start(TITLE)  # no exception: training must go on
    for step in range(1, 5):
        view.update(progress(step))
    view.finish()
    assert view._silent and detached == [True]  # stdout to /dev/null once, then quiet


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.4, "0 s"), (42, "42 s"), (185, "3 min 05 s"), (7620, "2 h 07 min")],
)
def test_time_left_reads_naturally(seconds, text):
    assert fmt_duration(seconds) == text


def test_a_run_that_fails_before_training_still_finishes_its_view():
    """A live panel left half drawn would garble pytest's screen: finish() comes however the
    run ends, here at a trace that cannot be created (after connecting)."""
    from pathlib import Path

    from hilbench import session
    from hilbench.backend.emulate import EmulatorBackend
    from hilbench.config import RunConfig
    from hilbench.errors import TraceError

    calls: list[str] = []

    class Recorder:
        def start(self, title: str) -> None:
            calls.append("start")

        def status(self, text: str) -> None:
            calls.append("status")

        def update(self, progress: Progress) -> None:
            calls.append("update")

        def finish(self) -> None:
            calls.append("finish")

    config = RunConfig(trace=Path("/proc/x.h5"), budget=80, live=False)
    with pytest.raises(TraceError, match=r"cannot create trace /proc/x\.h5"):
        session.run(config, backend=EmulatorBackend(link="memory"), view=Recorder())
    assert calls[0] == "start" and calls[-1] == "finish" and calls.count("finish") == 1
    assert "status" in calls  # "starting the emulator" was shown while it connected
