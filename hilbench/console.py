"""Showing a run as it goes: a rich live panel on a terminal, plain lines elsewhere.

A view hears five things from the session and the trainer: ``start(title)``, ``status(text)``
(what is happening before the first step: connecting, uploading, evaluating),
``event(kind, detail)`` (retries, resets, injected faults... as the trace records them),
``update(progress)`` after every step, and ``finish()``; during setup also
``transfer(what, done, total)`` (bytes of an upload the device acknowledged: a bar on the panel,
a line every ``period`` seconds in plain output). Both views show the same figures:
step, q, loss, test accuracy, forward passes of the budget, steps per second and the time
left, the step's host and device time, a loss sparkline and the event counts.

Losing the console never loses the run: a view whose output is gone (``hilbench run | head``,
a closed terminal) stops writing and training goes on.
"""

from __future__ import annotations

import math
import shutil
import sys
import textwrap
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext, suppress
from dataclasses import dataclass
from typing import Protocol

from rich.console import Console
from rich.control import Control
from rich.live import Live
from rich.segment import ControlType
from rich.text import Text

SPARK = "▁▂▃▄▅▆▇█"
SPARK_POINTS = 40  # the loss history a sparkline shows at most (the whole run, compressed)
#: Event kinds worth a count in the views, in this order (others follow as they come).
EVENT_ORDER = ("retry", "late", "resync", "reset", "recovered", "restored", "injected", "error")


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
    timing_model: str = ""  # the cost model's name when device_source is "modeled"
    accuracy_forward_passes: int | None = None  # when the accuracy was measured


class RunView(Protocol):
    def start(self, title: str) -> None: ...
    def update(self, progress: Progress) -> None: ...
    def finish(self) -> None: ...


class NullView:
    """Shows nothing."""

    def start(self, title: str) -> None:
        pass

    def status(self, text: str) -> None:
        pass

    def retitle(self, title: str) -> None:
        pass

    def event(self, kind: str, detail: str) -> None:
        pass

    def update(self, progress: Progress) -> None:
        pass

    def finish(self) -> None:
        pass


def view_status(view: object, text: str) -> None:
    """``view.status(text)`` for views that have it (a RunView needs only start/update/finish)."""
    status = getattr(view, "status", None)
    if status is not None:
        status(text)


def view_early(view: object, text: str) -> None:
    """``view.early(text)`` for views that have it: said before ``start`` when preparing the
    run (data, pre-training) takes long enough to leave the screen blank."""
    early = getattr(view, "early", None)
    if early is not None:
        early(text)


def view_title(view: object, title: str) -> None:
    """``view.retitle(title)`` for views that have it (the device is named once connected)."""
    retitle = getattr(view, "retitle", None)
    if retitle is not None:
        retitle(title)


def view_transfer(view: object, what: str, done: int, total: int) -> None:
    """``view.transfer(what, done, total)`` for views that have it; a status line with the
    share done for those that only have ``status``."""
    transfer = getattr(view, "transfer", None)
    if transfer is not None:
        transfer(what, done, total)
    else:
        view_status(view, f"{what}: {fmt_bytes(done)} of {fmt_bytes(total)}")


def view_event(view: object, kind: str, detail: str) -> None:
    """``view.event(kind, detail)`` for views that have it."""
    event = getattr(view, "event", None)
    if event is not None:
        event(kind, detail)


# ---------------------------------------------------------------- formatting


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def fmt_duration(seconds: float | None) -> str:
    """A time left: ``42 s``, ``3 min 05 s``, ``2 h 07 min``; ``-`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def fmt_bytes(n: float) -> str:
    """``812 B``, ``9.7 KiB``, ``1.25 MiB``."""
    if n < 1024:
        return f"{n:,.0f} B"
    if n < 1024 * 1024:
        return f"{n / 1024:,.1f} KiB"
    return f"{n / 1024 / 1024:,.2f} MiB"


class Transfer:
    """One upload as a view shows it: bytes done of the total, the rate since it began and
    the time left at that rate."""

    def __init__(self, what: str, total: int, now: float) -> None:
        self.what = what
        self.total = max(1, total)
        self.done = 0
        self.started = now
        self.now = now

    def update(self, done: int, total: int, now: float) -> None:
        self.done, self.total, self.now = done, max(1, total, done), now

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total)

    @property
    def rate(self) -> float | None:
        """Bytes a second, once there is something to measure it on."""
        elapsed = self.now - self.started
        return self.done / elapsed if elapsed > 0.2 and self.done else None

    def time_left(self) -> float | None:
        rate = self.rate
        return (self.total - self.done) / rate if rate else None

    def describe(self) -> str:
        """``4.0 KiB of 9.7 KiB (41%), 88.0 KiB/s, 1 s left``."""
        text = f"{fmt_bytes(self.done)} of {fmt_bytes(self.total)} ({self.fraction:.0%})"
        if self.rate:
            text += f", {fmt_bytes(self.rate)}/s, {fmt_duration(self.time_left())} left"
        return text


def _transfer_of(
    current: Transfer | None, what: str, done: int, total: int, now: float
) -> Transfer:
    """``current`` brought up to date, or a new Transfer when another one began."""
    if current is None or current.what != what or done < current.done:
        current = Transfer(what, total, now)
    current.update(done, total, now)
    return current


def _accuracy(progress: Progress) -> str:
    return "-" if progress.accuracy is None else f"{progress.accuracy:.1%}"


def _loss(progress: Progress) -> str:
    return f"{progress.loss:.4f}" if math.isfinite(progress.loss) else "-"


def format_events(counts: dict[str, int]) -> str:
    """``retry 2, reset 1, recovered 1, injected 5`` (the usual kinds first), or ``none``."""
    order = [k for k in EVENT_ORDER if counts.get(k)] + sorted(
        k for k in counts if k not in EVENT_ORDER and counts[k]
    )
    return ", ".join(f"{k} {counts[k]:,}" for k in order) or "none"


class Tracker:
    """What both views derive from the updates: rates, time left, loss history, events."""

    #: Rates are measured over windows of at least this long (a step takes ~1 ms).
    WINDOW_S = 0.5

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.events: dict[str, int] = {}
        self.steps_per_s: float | None = None
        self.passes_per_s: float | None = None
        self._mark: tuple[float, int, int] | None = None  # (time, step, forward passes)
        self._points: list[float] = []  # loss means of buckets of `_bucket` steps
        self._bucket = 1
        self._acc: list[float] = []  # losses of the bucket being filled

    def event(self, kind: str) -> None:
        self.events[kind] = self.events.get(kind, 0) + 1

    def update(self, p: Progress, now: float | None = None) -> None:
        """Take a step's progress (``now``: the view's clock read, when it has one)."""
        if now is None:
            now = self.clock()
        if self._mark is None:
            self._mark = (now, p.step, p.forward_passes)
        else:
            t0, s0, f0 = self._mark
            dt = now - t0
            if dt >= self.WINDOW_S and p.step > s0:
                steps, passes = (p.step - s0) / dt, (p.forward_passes - f0) / dt
                if self.steps_per_s is None or self.passes_per_s is None:
                    self.steps_per_s, self.passes_per_s = steps, passes
                else:  # smoothed: a step's time varies with q and the link
                    self.steps_per_s = 0.6 * self.steps_per_s + 0.4 * steps
                    self.passes_per_s = 0.6 * self.passes_per_s + 0.4 * passes
                self._mark = (now, p.step, p.forward_passes)
        if math.isfinite(p.loss):
            self._acc.append(p.loss)
            if len(self._acc) >= self._bucket:
                self._points.append(sum(self._acc) / len(self._acc))
                self._acc = []
                if len(self._points) >= 2 * SPARK_POINTS:  # the whole run in so many points
                    self._points = [
                        (a + b) / 2
                        for a, b in zip(self._points[::2], self._points[1::2], strict=True)
                    ]
                    self._bucket *= 2

    def time_left(self, p: Progress) -> float | None:
        if not self.passes_per_s or p.budget <= 0:
            return None
        return max(0, p.budget - p.forward_passes) / self.passes_per_s

    def sparkline(self, width: int = SPARK_POINTS) -> str:
        points = self._points[-width:]
        if len(points) < 2:
            return ""
        lo, hi = min(points), max(points)
        span = (hi - lo) or 1.0
        return "".join(SPARK[min(7, int((v - lo) / span * 7.999))] for v in points)


# ---------------------------------------------------------------- plain lines


#: What a line too long for the width continues with (plain lines wrap, never get cut).
CONTINUATION = "[hilbench]   "


def plain_width() -> int:
    """The width plain lines fit: the terminal's, else ``COLUMNS``, else 80 (a CI log)."""
    return max(40, shutil.get_terminal_size((80, 24)).columns)


class PlainView:
    """One line every ``period`` seconds (for CI logs and pipes); setup steps as they come.
    A line wider than ``width`` (default: plain_width()) goes on at word boundaries on the
    next lines, so no number is cut."""

    def __init__(
        self,
        write: Callable[[str], None] | None = None,
        period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        width: int | None = None,
    ) -> None:
        self.write = write or (lambda line: print(line, flush=True))
        self.width = width or plain_width()
        self.period = period
        self.clock = clock
        self._last = 0.0
        self._title = ""
        self._progress: Progress | None = None
        self._tracker = Tracker(clock)
        self._silent = False  # the output is gone: keep training, stop writing
        self._status_key = ""
        self._status_at = 0.0
        self._transfer: Transfer | None = None

    def early(self, text: str) -> None:
        """A line before the run's title: what a slow preparation is doing."""
        self._emit(f"[hilbench] {text}")

    def _emit(self, line: str) -> None:
        if self._silent:
            return
        try:
            for part in line.split("\n"):
                for piece in _wrapped(part, self.width):
                    self.write(piece)
        except (BrokenPipeError, ValueError, OSError):  # a closed pipe or file
            self._silent = True
            detach_stdout()

    def start(self, title: str) -> None:
        self._title = title
        self._emit(f"[hilbench] {title}")

    def status(self, text: str) -> None:
        # one line per phase ("uploading the model"), then at most one per period
        key = text.split(":", 1)[0]
        now = self.clock()
        if key != self._status_key or now - self._status_at >= self.period:
            self._status_key, self._status_at = key, now
            self._emit(f"[hilbench] {text}")

    def transfer(self, what: str, done: int, total: int) -> None:
        # a line when it begins, then one a period; none at the end (the next phase says it)
        now = self.clock()
        self._transfer = t = _transfer_of(self._transfer, what, done, total, now)
        if what != self._status_key:
            line = f"{what} ({fmt_bytes(t.total)})"
        elif done < t.total and now - self._status_at >= self.period:
            line = f"{what}: {t.describe()}"
        else:
            return
        self._status_key, self._status_at = what, now
        self._emit(f"[hilbench] {line}")

    def retitle(self, title: str) -> None:
        self._title = title  # the status line that named the device was printed

    def event(self, kind: str, detail: str) -> None:
        self._tracker.event(kind)

    def update(self, progress: Progress) -> None:
        self._progress = progress
        now = self.clock()  # one clock read a step, for the tracker's rates and the period
        self._tracker.update(progress, now)
        if now - self._last >= self.period:
            self._last = now
            self._emit(self._line(progress))

    def finish(self) -> None:
        if self._progress is not None:  # once: the session may call it again on its way out
            self._emit(self._line(self._progress))
            self._progress = None

    def _line(self, p: Progress) -> str:
        """The step's line: its fields, wrapped between fields (never inside one)."""
        return "\n".join(_packed(self._fields(p), self.width))

    def _fields(self, p: Progress) -> list[str]:
        t = self._tracker
        pct = f" ({p.forward_passes / p.budget:.0%})" if p.budget else ""
        fields = [
            f"[hilbench] step {p.step} q {p.q} loss {_loss(p)} acc {_accuracy(p)}",
            f"fwd {p.forward_passes}/{p.budget}{pct}",
        ]
        if t.steps_per_s is not None:
            fields.append(f"{t.steps_per_s:,.0f} steps/s, {fmt_duration(t.time_left(p))} left")
        fields.append(f"step {_fmt_time(p.step_host_s)} (host)")
        if p.device_source:
            fields.append(f"device {_fmt_time(p.step_device_s)} ({_source(p)})")
        events = format_events(t.events)
        if events != "none":
            fields.append(f"events: {events}")
        return fields


def _source(p: Progress) -> str:
    """Who measured the device's time: "device", or "modeled: m55@600MHz" (the cost model)."""
    if p.device_source == "modeled" and p.timing_model:
        return f"modeled: {p.timing_model}"
    return str(p.device_source)


def _packed(fields: list[str], width: int) -> list[str]:
    """Fields joined by spaces into lines of at most ``width`` columns where they fit; a new
    line (after CONTINUATION) starts between two fields."""
    lines = [fields[0]]
    for field in fields[1:]:
        if len(lines[-1]) + 1 + len(field) <= width:
            lines[-1] += " " + field
        else:
            lines.append(CONTINUATION + field)
    return lines


def _wrapped(line: str, width: int) -> list[str]:
    """``line`` as lines of at most ``width`` columns, broken between words only."""
    if len(line) <= width:
        return [line]
    return textwrap.wrap(
        line,
        width,
        subsequent_indent=CONTINUATION,
        break_long_words=False,
        break_on_hyphens=False,
    )


def detach_stdout() -> None:
    """Point stdout at /dev/null once its reader is gone, so nothing else (the summary, the
    interpreter's final flush) dies on the broken pipe (as the Python docs advise)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


# ---------------------------------------------------------------- the live panel


def _pack(fields: list[tuple[str | tuple[str, ...], str]], width: int) -> Text:
    """Fields on one line, in order of importance: each is (text, style) or (variants, style)
    with its variants longest first; the first variant that fits is shown and a field none of
    whose variants fits is left out, so a narrow terminal keeps the first fields in a short
    form and the line never wraps."""
    indent, gap = ("  ", "  ") if width >= 60 else ("", " ")
    line = Text(indent, no_wrap=True, overflow="ellipsis")
    used = len(indent)
    for texts, style in fields:
        sep = gap if used > len(indent) else ""
        for text in (texts,) if isinstance(texts, str) else texts:
            if text and used + len(sep) + len(text) <= width:
                line.append(sep)
                line.append(text, style=style)
                used += len(sep) + len(text)
                break
    return line


class LiveView:
    """A rich live panel, refreshed a few times a second, with a fixed number of lines.

    Inside another program's output (pytest's progress line), give ``column``: a callable
    returning the column where that program left the cursor. The panel then draws on the lines
    below that line, never on it, and when it goes the cursor is put back where the program
    left it, so the program's line reads as if the panel had never been there. A panel that
    would not fit under that line on the screen is not shown.
    """

    #: Screen lines the panel needs beyond its own height: the host program's line, and
    #: slack for a terminal that shrinks while the panel is shown.
    SPARE_LINES = 3
    #: The panel's lines: the title, then four lines whatever the width (fields that do not
    #: fit are dropped, never wrapped), so its height never changes while it is shown.
    HEIGHT = 5
    BAR_WIDTH = 24

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
        self._started = False  # a step was shown
        self._status = ""
        self._since = time.monotonic()
        self._tracker = Tracker()
        self._transfer: Transfer | None = None  # an upload during setup: its bar
        self._back: Control | None = None  # what puts the cursor back after a transient panel
        self._gone = False  # the terminal went away: keep training, stop drawing

    def start(self, title: str) -> None:
        self._title = title
        self._since = time.monotonic()
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
            try:
                if rows_above:
                    self.console.control(Control((ControlType.CARRIAGE_RETURN,)))
                    self.console.line()
                self._back = back
                self._live.start()
            except OSError:
                self._lost()

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

    def status(self, text: str) -> None:
        self._status = text
        self._transfer = None  # a new phase: the bar comes back with its first bytes
        self._refresh(force=True)

    def transfer(self, what: str, done: int, total: int) -> None:
        self._transfer = t = _transfer_of(self._transfer, what, done, total, time.monotonic())
        self._status = what
        self._refresh(force=done >= t.total)

    def retitle(self, title: str) -> None:
        self._title = title
        self._refresh(force=True)

    def event(self, kind: str, detail: str) -> None:
        self._tracker.event(kind)

    def update(self, progress: Progress) -> None:
        self._progress = progress
        self._started = True
        self._tracker.update(progress)
        self._refresh()

    def _refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._live and (force or now - self._last >= 0.1):
            self._last = now
            try:
                with self.guard():
                    self._live.update(self._render(), refresh=True)
            except OSError:
                self._lost()

    def _lost(self) -> None:
        """The terminal is gone (closed, or a pipe whose reader quit)."""
        self._gone = True
        live, self._live = self._live, None
        if live is not None:
            live.transient = False  # erasing would write again
            with suppress(OSError):
                live.stop()
        detach_stdout()

    def finish(self) -> None:
        if self._live:
            try:
                with self.guard():
                    self._live.update(self._render(), refresh=True)
                    self._live.stop()
                    if self.transient and self._back is not None:
                        self.console.control(self._back)
            except OSError:
                self._lost()
            self._live = None
            self._back = None

    def _bar(self, fraction: float) -> str:
        filled = min(self.BAR_WIDTH, int(fraction * self.BAR_WIDTH))
        return "█" * filled + "░" * (self.BAR_WIDTH - filled)

    def _render(self) -> Text:
        p, t = self._progress, self._tracker
        width = max(20, self.console.size.width)
        title = Text(self._title, style="bold", no_wrap=True, overflow="ellipsis")
        if not self._started:  # setting up: say what is happening
            waited = time.monotonic() - self._since
            line2 = _pack(
                [(self._status or "starting", "yellow"), (f"{waited:.1f} s", "dim")], width
            )
        else:
            line2 = _pack(
                [
                    (f"step {p.step:,}", "bold"),
                    (f"loss {_loss(p)}", "bold"),
                    ((f"test acc {_accuracy(p)}", f"acc {_accuracy(p)}"), "bold green"),
                    (f"q {p.q}", ""),
                    (
                        ""
                        if p.accuracy_forward_passes is None
                        else f"(accuracy at {p.accuracy_forward_passes:,} passes)",
                        "dim",
                    ),
                ],
                width,
            )
        up = self._transfer if not self._started else None
        if up is not None:  # setting up: the upload's bar where the budget's will be
            frac = up.fraction
            of = f"{fmt_bytes(up.done)} of {fmt_bytes(up.total)}"
            line3 = _pack([(f"{frac:.0%}", "bold"), (of, ""), (self._bar(frac), "cyan")], width)
            rate = "-" if up.rate is None else f"{fmt_bytes(up.rate)}/s"
            line4 = _pack([(f"{fmt_duration(up.time_left())} left", "bold"), (rate, "")], width)
        else:
            frac = p.forward_passes / p.budget if p.budget else 0.0
            of = f"{p.forward_passes:,}/{p.budget:,}"
            line3 = _pack(
                [
                    (f"{frac:.0%}", "bold"),
                    ((f"{of} forward passes", f"{of} fwd"), ""),
                    (self._bar(frac), "cyan"),
                ],
                width,
            )
            rate = "-" if t.steps_per_s is None else f"{t.steps_per_s:,.0f} steps/s"
            device = f"{_fmt_time(p.step_device_s)} {_source(p)}" if p.device_source else ""
            line4 = _pack(
                [
                    (f"{fmt_duration(t.time_left(p))} left", "bold"),
                    (rate, ""),
                    (f"step {_fmt_time(p.step_host_s)} host" if self._started else "", ""),
                    (device, "dim"),
                ],
                width,
            )
        spark = t.sparkline(min(SPARK_POINTS, max(0, width - 40)))
        line5 = _pack(
            [
                (
                    (f"events: {format_events(t.events)}", format_events(t.events)),
                    "red" if _alarming(t.events) else "",
                ),
                (f"loss {spark}" if spark else "", "magenta"),
            ],
            width,
        )
        out = Text("\n", no_wrap=True).join([title, line2, line3, line4, line5])
        out.no_wrap = True
        out.overflow = "ellipsis"
        return out


def _alarming(events: dict[str, int]) -> bool:
    return any(events.get(k) for k in ("retry", "reset", "error", "resync"))


def make_view(live: bool, console: Console | None = None) -> RunView:
    """A live panel on a terminal (unless ``live`` is off), plain periodic lines otherwise."""
    console = console or Console()
    if live and console.is_terminal:
        return LiveView(console)
    return PlainView(write=lambda line: print(line, file=sys.stdout, flush=True))
