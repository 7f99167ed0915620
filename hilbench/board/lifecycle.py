"""A board's way from absent to training, one timed step at a time.

``absent -> loaded -> ready -> model loaded -> training``: the board backend moves it through
the first two (firmware written and started, or already running; HELLO answered), a run
through the last two (model and data uploaded; training started), and back (a run ends: model
loaded; the board is closed: absent). Each move is logged with its duration on the
``hilbench.board`` logger (pytest shows that log with a failing test), and a failing test's
report names the board, the stage it reached and the last bytes its UART sent
(:meth:`Lifecycle.report`).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from hilbench.errors import HilbenchError

log = logging.getLogger("hilbench.board")


class Stage(enum.Enum):
    """Where a board is; the order is the way up."""

    ABSENT = "absent"
    LOADED = "loaded"  # our firmware is in its RAM and running
    READY = "ready"  # it answered HELLO
    MODEL_LOADED = "model loaded"  # a model (and its data) uploaded
    TRAINING = "training"

    @property
    def rank(self) -> int:
        return list(Stage).index(self)


@dataclass(frozen=True)
class Transition:
    """One move and how long it took."""

    before: Stage
    after: Stage
    seconds: float
    detail: str = ""

    def __str__(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.before.value} -> {self.after.value} in {self.seconds:.3f} s{detail}"


@dataclass
class Move:
    """What a move did, for its log line (set inside ``Lifecycle.moving_to``)."""

    detail: str = ""


class Lifecycle:
    """The stage of one board (named ``board``: its port and probe id) and the moves so far.

    Moves go up one stage at a time, or back to any stage at or below the current one (a
    reload, the end of a run, closing); anything else is a bug in the caller (ValueError).
    ``tail()`` gives the last bytes the board's UART sent, for :meth:`report`.
    """

    def __init__(
        self,
        board: str,
        *,
        tail: Callable[[], bytes] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.board = board
        self.tail = tail
        self.clock = clock
        self.stage = Stage.ABSENT
        self.transitions: list[Transition] = []
        self.failed: str = ""  # the move that failed, and why (for the report)
        self._entered = clock()

    def enter(self, stage: Stage, seconds: float | None = None, detail: str = "") -> Transition:
        """Record (and log) the move to ``stage`` that took ``seconds`` (by default: the time
        since the last move)."""
        if seconds is None:
            seconds = self.clock() - self._entered
        self._check(stage)
        move = Transition(self.stage, stage, seconds, detail)
        self.transitions.append(move)
        self.stage = stage
        self.failed = ""
        self._entered = self.clock()
        log.info("%s: %s", self.board, move)
        return move

    @contextmanager
    def moving_to(self, stage: Stage, detail: str = "") -> Iterator[Move]:
        """Time the block as the move to ``stage`` (the block may set the yielded
        ``Move.detail``); a block that raises is logged as the failed move (the stage stays
        where it was)."""
        self._check(stage)  # before the work, not after it
        t0 = self.clock()
        move = Move(detail)
        try:
            yield move
        except BaseException as exc:
            seconds = self.clock() - t0
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.failed = f"{self.stage.value} -> {stage.value} failed after {seconds:.3f} s: {why}"
            if isinstance(exc, HilbenchError):  # its one line is printed by whoever stops
                log.warning("%s: %s -> %s failed after %.3f s", self.board, self.stage.value,
                            stage.value, seconds)  # fmt: skip
            else:
                log.warning("%s: %s", self.board, self.failed)
            raise
        self.enter(stage, self.clock() - t0, move.detail)

    def _check(self, stage: Stage) -> None:
        if stage.rank > self.stage.rank + 1:
            raise ValueError(
                f"{self.board}: cannot go from {self.stage.value} to {stage.value} "
                "(one stage up at a time)"
            )

    def report(self) -> list[tuple[str, str]]:
        """(label, text) rows for a failing test: the board, its stage, the moves, the tail."""
        since = self.clock() - self._entered
        rows = [("board", self.board), ("stage", f"{self.stage.value} (for {since:.1f} s)")]
        if self.failed:
            rows.append(("failed", self.failed))
        moves = self.transitions[-6:]
        if moves:
            skipped = len(self.transitions) - len(moves)
            text = "; ".join(str(m) for m in moves)
            rows.append(("moves", (f"... {skipped} earlier; " if skipped else "") + text))
        if self.tail is not None:
            rows.append(("uart tail", describe_tail(bytes(self.tail()))))
        return rows


def describe_tail(tail: bytes) -> str:
    """The last bytes a UART sent, for a person: text as text (the firmware's fault report,
    a bootloader's banner), frames in hex; text after binary frames is shown as that text."""
    if not tail:
        return "nothing"
    if sum(map(_is_text, tail)) >= 0.9 * len(tail):
        return repr(tail[-120:].decode("ascii", errors="replace"))
    end = len(tail)
    while end > 0 and _is_text(tail[end - 1]):
        end -= 1
    words = tail[end:].decode("ascii")
    if len(words.strip()) >= 8:  # a message after the frames
        return f"{end} bytes of frames, then {words[-120:]!r}"
    return tail[-64:].hex(" ")


def _is_text(byte: int) -> bool:
    return 32 <= byte < 127 or byte in (9, 10, 13)
