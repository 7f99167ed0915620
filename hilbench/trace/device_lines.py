"""The device's own words in a trace: its ``device`` events (LOG lines) and the ``console``
event (bytes before its first frame), for ``hilbench report`` and a failing test's section."""

from __future__ import annotations

from typing import Any, NamedTuple


class Said(NamedTuple):
    """One event of the device's words: the step in progress, the time (s since the Unix
    epoch), ``device`` or ``console``, and the line."""

    step: int
    time: float
    kind: str
    line: str


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def device_words(trace: Any) -> list[Said]:
    """Every ``device`` and ``console`` event of the run, in order."""
    events = trace.events
    out = []
    for row in events:
        kind = _text(row["kind"])
        if kind in ("device", "console"):
            out.append(Said(int(row["step"]), float(row["time"]), kind, _text(row["detail"])))
    return out


def last_lines(trace: Any, n: int = 8) -> tuple[list[Said], int]:
    """The last ``n`` of the run's device words, and how many it recorded in all."""
    words = device_words(trace)
    return words[-n:], len(words)


def format_said(said: Said) -> str:
    """``step 12  [boot] boot: …`` (``before HELLO`` for the console bytes)."""
    where = f"step {said.step}" if said.step >= 0 else "at start"
    return f"{where:<10} {said.line}"
