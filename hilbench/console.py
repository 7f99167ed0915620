"""Showing a run as it goes: a rich live panel on a terminal, plain lines elsewhere."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol

from rich.console import Console
from rich.control import Control
from rich.live import Live
from rich.segment import ControlType
from rich.table import Table


@dataclass
class Progress:
    """What the view shows: the latest step and the latest evaluation."""

    step: int = 0
    q: int = 0
    loss: float = float("nan")
    accuracy: float | None = None
    forward_passes: int = 0
    budget: int = 0
    step_host_s: float = 0.0  # host wall clock for the last step's round trips
    step_device_s: float | None = None  # the device's own time for the step
    device_source: str | None = None  # "device" or "modeled"


class RunView(Protocol):
    def start(self, title: str) -> None: ...
    def update(self, progress: Progress) -> None: ...
    def finish(self) -> None: ...


class NullView:
    """Shows nothing."""

    def start(self, title: str) -> None:
        pass

    def update(self, progress: Progress) -> None:
        pass

    def finish(self) -> None:
        pass


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def _accuracy(progress: Progress) -> str:
    return "-" if progress.accuracy is None else f"{progress.accuracy:.1%}"


class PlainView:
    """One line every ``period`` seconds (for CI logs and pipes)."""

    def __init__(self, write: Callable[[str], None] | None = None, period: float = 2.0) -> None:
        self.write = write or (lambda line: print(line, flush=True))
        self.period = period
        self._last = 0.0
        self._title = ""
        self._progress: Progress | None = None

    def start(self, title: str) -> None:
        self._title = title
        self.write(f"[hilbench] {title}")

    def update(self, progress: Progress) -> None:
        self._progress = progress
        now = time.monotonic()
        if now - self._last >= self.period:
            self._last = now
            self.write(self._line(progress))

    def finish(self) -> None:
        if self._progress is not None:
            self.write(self._line(self._progress))

    @staticmethod
    def _line(p: Progress) -> str:
        device = (
            f" device {_fmt_time(p.step_device_s)} ({p.device_source})" if p.device_source else ""
        )
        return (
            f"[hilbench] step {p.step} q {p.q} loss {p.loss:.4f} acc {_accuracy(p)} "
            f"fwd {p.forward_passes}/{p.budget} step {_fmt_time(p.step_host_s)} (host){device}"
        )


class LiveView:
    """A rich live panel, refreshed a few times a second, that disappears when done.

    Inside another program's output (pytest's progress line), give ``column``: a callable
    returning the column where that program left the cursor. The panel then draws on the lines
    below that line, never on it, and when it goes the cursor is put back where the program
    left it, so the program's line reads as if the panel had never been there. A panel that
    would not fit under that line on the screen is not shown.
    """

    #: Screen lines the panel needs beyond its own height: the host program's line, and
    #: slack for a table that grows a line as its numbers widen.
    SPARE_LINES = 3

    def __init__(
        self,
        console: Console | None = None,
        *,
        guard: Callable[[], AbstractContextManager[object]] | None = None,
        transient: bool = False,
        column: Callable[[], int] | None = None,
    ) -> None:
        self.console = console or Console()
        self.guard = guard or nullcontext  # e.g. pytest's "capture disabled" context
        self.transient = transient
        self.column = column
        self._live: Live | None = None
        self._title = ""
        self._last = 0.0
        self._progress = Progress()
        self._back: Control | None = None  # what puts the cursor back after a transient panel

    def start(self, title: str) -> None:
        self._title = title
        with self.guard():
            rows_above, back = self._below_host_line()
            panel = self._render()
            height = len(self.console.render_lines(panel, pad=False))
            if height + rows_above + self.SPARE_LINES > self.console.size.height:
                return  # no room: showing it would scroll the host program's line away
            self._live = Live(
                panel,
                console=self.console,
                auto_refresh=False,
                transient=self.transient,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            if rows_above:
                self.console.control(Control((ControlType.CARRIAGE_RETURN,)))
                self.console.line()
            self._back = back
            self._live.start()

    def _below_host_line(self) -> tuple[int, Control | None]:
        """(screen rows the host program's unfinished line takes, the control sequence that
        returns the cursor to its end from the start of the line below it)."""
        column = self.column() if self.column else 0
        if column <= 0:
            return 0, None
        width = max(1, self.console.size.width)
        rows = -(-column // width)
        last = column - (rows - 1) * width
        if last == width:  # the line fills its last row: the terminal would wrap there anyway
            return rows, Control()
        return rows, Control((ControlType.CURSOR_UP, 1), (ControlType.CURSOR_MOVE_TO_COLUMN, last))

    def update(self, progress: Progress) -> None:
        self._progress = progress
        now = time.monotonic()
        if self._live and now - self._last >= 0.1:
            self._last = now
            with self.guard():
                self._live.update(self._render(), refresh=True)

    def finish(self) -> None:
        if self._live:
            with self.guard():
                self._live.update(self._render(), refresh=True)
                self._live.stop()
                if self.transient and self._back is not None:
                    self.console.control(self._back)
            self._live = None
            self._back = None

    def _render(self) -> Table:
        p = self._progress
        table = Table(title=self._title, title_justify="left", show_header=True)
        for column in ("step", "q", "loss", "test acc", "forward passes", "step (host)", "device"):
            table.add_column(column, justify="right")
        device = f"{_fmt_time(p.step_device_s)} {p.device_source}" if p.device_source else "-"
        table.add_row(
            str(p.step),
            str(p.q),
            f"{p.loss:.4f}",
            _accuracy(p),
            f"{p.forward_passes:,}/{p.budget:,}",
            _fmt_time(p.step_host_s),
            device,
        )
        return table


def make_view(live: bool, console: Console | None = None) -> RunView:
    """A live panel on a terminal (unless ``live`` is off), plain periodic lines otherwise."""
    console = console or Console()
    if live and console.is_terminal:
        return LiveView(console)
    return PlainView(write=lambda line: print(line, file=sys.stdout, flush=True))
