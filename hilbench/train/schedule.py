"""How many gradient samples q each step takes. v0: fixed q; QScheduler comes next."""

from __future__ import annotations

from typing import Protocol

from hilbench.config import parse_scheduler


class QSchedule(Protocol):
    """Decides q before each step and sees the step's mean loss after it."""

    name: str

    def next_q(self, step: int) -> int: ...
    def observe(self, step: int, loss: float) -> None: ...


class FixedQ:
    """The same q every step."""

    def __init__(self, q: int) -> None:
        self.q = q
        self.name = f"fixed:{q}"

    def next_q(self, step: int) -> int:
        return self.q

    def observe(self, step: int, loss: float) -> None:
        pass


def make_schedule(spec: str) -> QSchedule:
    """A schedule from its command-line spelling, e.g. ``fixed:4``."""
    _, q = parse_scheduler(spec)
    return FixedQ(q)
