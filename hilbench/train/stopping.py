"""When a run stops before its budget is spent: a wall-clock limit and stopping rules.

``--time-limit 30s`` (``time_limit_s=30``) ends the run after its first step that finishes
past 30 s of wall clock; ``--until "accuracy>=0.9"`` (``until=``) ends it at the first test
evaluation (or, for ``train_loss``, the first step) where the rule holds. Several rules are
joined with commas and any one stops the run. Either way the run is finished as complete, its
final weights evaluated and CRC'd as at the end of a budget, and the reason is the run's
``stop_reason`` attribute (``"budget"`` when the budget was spent).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from hilbench.config import format_duration, parse_until

#: stop_reason of a run that spent its budget.
BUDGET = "budget"


class Stopper:
    """Watches one run: ``after_step`` and ``after_eval`` return the stop reason, or ""."""

    def __init__(
        self, time_limit_s: float = 0.0, until: str = "", clock: Callable[[], float] | None = None
    ) -> None:
        self.time_limit_s = float(time_limit_s or 0.0)
        self.rules = parse_until(until)
        self.clock = clock or time.monotonic
        self.started = self.clock()
        self.reason = ""

    @property
    def active(self) -> bool:
        return bool(self.time_limit_s or self.rules)

    def elapsed(self) -> float:
        return self.clock() - self.started

    def after_step(self, *, steps: int, forward_passes: int, train_loss: float) -> str:
        if self.time_limit_s:
            elapsed = self.elapsed()
            if elapsed >= self.time_limit_s:
                return self._stop(
                    f"time limit {format_duration(self.time_limit_s)} reached after "
                    f"{elapsed:.1f} s ({steps:,} steps, {forward_passes:,} forward passes)"
                )
        if not self.rules:  # the common case: nothing to build per step
            return ""
        seen = {"steps": steps, "forward_passes": forward_passes, "train_loss": train_loss}
        return self._rules(seen, f"at step {steps:,}, {forward_passes:,} forward passes")

    def after_eval(self, *, forward_passes: int, accuracy: float, loss: float) -> str:
        seen = {"accuracy": accuracy, "loss": loss}
        return self._rules(seen, f"at the evaluation after {forward_passes:,} forward passes")

    def _rules(self, seen: dict[str, float], where: str) -> str:
        for rule in self.rules:
            if rule.metric in seen and rule.holds(float(seen[rule.metric])):
                return self._stop(f"until {rule}: {rule.metric} {seen[rule.metric]:.4g} {where}")
        return ""

    def _stop(self, reason: str) -> str:
        self.reason = reason
        return reason
