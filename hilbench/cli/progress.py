"""A transfer's progress on stderr for commands without a run view (``hilbench load``,
``hilbench infer``): a rich bar on a terminal, a line every few seconds otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from hilbench.client import events
from hilbench.console import Transfer, fmt_bytes

PERIOD_S = 2.0  # plain output: at most one line this often


class TransferBar:
    """``with TransferBar() as bar: ...`` then ``bar.update(what, done, total)`` per chunk."""

    def __init__(self, period: float = PERIOD_S, clock: Callable[[], float] = time.monotonic):
        self.period = period
        self.clock = clock
        self._bar = None
        self._tasks: dict[str, int] = {}
        self._transfer: Transfer | None = None
        self._said_at: float | None = None

    def __enter__(self) -> TransferBar:
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

            self._bar = Progress(
                "{task.description}",
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.start()
        return self

    def update(self, what: str, done: int, total: int) -> None:
        if self._bar is not None:
            if what not in self._tasks:
                self._tasks[what] = self._bar.add_task(what, total=total)
            self._bar.update(self._tasks[what], completed=done, total=total)
            return
        now = self.clock()
        t = self._transfer
        if t is None or t.what != what or done < t.done:
            if t is None or t.what != what:
                self._said_at = None  # a new kind of transfer: one line now
            self._transfer = t = Transfer(what, total, now)
        t.update(done, total, now)
        if self._said_at is None:  # it begins: what and how much
            line = f"{what} ({fmt_bytes(total)})"
        elif now - self._said_at >= self.period and done < t.total:
            line = f"{what}: {t.describe()}"
        else:
            return
        self._said_at = now
        print(line, file=sys.stderr, flush=True)

    def to(self, what: str) -> Callable[[events.Transfer], None]:
        """A subscriber of upload / load events that updates the line named ``what``."""
        return lambda transfer: self.update(what, transfer.done, transfer.total)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
