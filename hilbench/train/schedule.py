"""How many gradient samples q each step takes, and how lr and eps move over a run.

Python API for custom schedulers: subclass :class:`Scheduler` (or implement its three
methods) and pass an instance to ``hilbench.session.run(config, schedule=...)``, or register
a factory so ``--scheduler NAME[:ARGS]`` builds it::

    from hilbench.train.schedule import Scheduler, register

    class Doubling(Scheduler):
        def __init__(self, arg=None):
            self.name, self.q = "doubling", 1
        def next_q(self, step):
            return self.q
        def observe(self, step, loss, forward_passes):
            if step % 1000 == 999:
                self.q = min(2 * self.q, 64)

    register("doubling", Doubling)

The trainer calls ``start(budget)`` once, then per step ``next_q(step)`` (clamped to what
the budget has left), ``lr_scale(q)`` (multiplies the run's learning rate; 1 by default) and,
after the step, ``observe(step, loss, forward_passes)`` with the step's mean training loss
in nats and the forward passes spent so far.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from hilbench.config import EXTRA_SCHEDULERS, parse_scheduler
from hilbench.config import rate_schedule as _rate_schedule
from hilbench.errors import ConfigError


class Scheduler:
    """Base class: a fixed q of 1 unless overridden."""

    name = "scheduler"

    def start(self, budget: int) -> None:
        """Called once before the first step with the run's forward-pass budget."""

    def next_q(self, step: int) -> int:
        return 1

    def lr_scale(self, q: int) -> float:
        return 1.0

    def observe(self, step: int, loss: float, forward_passes: int) -> None:
        pass


class FixedQ(Scheduler):
    """The same q every step."""

    def __init__(self, q: int) -> None:
        self.q = q
        self.name = f"fixed:{q}"

    def next_q(self, step: int) -> int:
        return self.q


class QScheduler(Scheduler):
    """q grows when training stops making progress (defaults need no per-task tuning).

    The run's forward-pass budget is cut into ``windows`` equal windows. At the end of each
    window the mean training loss of the window is compared with the previous window's: if
    it fell by less than ``min_improvement`` (relative), progress has stalled and q is
    multiplied by ``factor`` (bounded by ``q_max``). The window right after a change is
    a cooldown: it is not compared, because a larger q at the same learning rate spends more
    forward passes per step and so itself looks like a plateau; without the cooldown the
    rule runs away to ``q_max``. A loss that *rose* by more than ``blowup`` (relative) is
    not a plateau but an unstable rate: q grows at once, cooldown or not.

    The learning rate is not coupled to q (``lr_scale`` is 1): raising q at a fixed rate
    lowers the variance of each step, which both anneals the noise floor late in training
    and rescues a rate too large for small q (the stable rate grows about linearly in q).
    """

    def __init__(
        self,
        q_min: int = 1,
        q_max: int = 32,
        *,
        windows: int = 40,
        min_improvement: float = 0.01,
        factor: int = 2,
        cooldown: int = 1,
        blowup: float = 0.05,
        min_window: int = 200,
    ) -> None:
        if not 1 <= q_min <= q_max <= 256:
            raise ConfigError(
                f"qscheduler bounds q_min={q_min}, q_max={q_max} are out of range",
                "use 1 <= q_min <= q_max <= 256",
            )
        if factor < 2 or windows < 2 or cooldown < 0:
            raise ConfigError(
                f"qscheduler factor={factor}, windows={windows}, cooldown={cooldown} invalid",
                "use factor >= 2, windows >= 2, cooldown >= 0",
            )
        self.q_min, self.q_max, self.q = q_min, q_max, q_min
        self.windows, self.min_improvement, self.factor = windows, min_improvement, factor
        self.cooldown, self.blowup, self.min_window = cooldown, blowup, min_window
        self.name = "qscheduler"
        self.window = min_window
        self._edge = min_window
        self._sum = 0.0
        self._n = 0
        self._prev: float | None = None
        self._cool = 0
        self.history: list[tuple[int, int]] = [(0, q_min)]  # (forward passes, new q)

    def start(self, budget: int) -> None:
        self.window = max(self.min_window, budget // self.windows)
        self._edge = self.window

    def next_q(self, step: int) -> int:
        return self.q

    def observe(self, step: int, loss: float, forward_passes: int) -> None:
        if math.isfinite(loss):
            self._sum += loss
            self._n += 1
        if forward_passes < self._edge:
            return
        self._edge = forward_passes + self.window
        mean = self._sum / self._n if self._n else math.inf
        self._sum, self._n = 0.0, 0
        prev, self._prev = self._prev, mean
        if prev is None:
            return
        rose = mean > prev * (1 + self.blowup)
        if self._cool > 0 and not rose:
            self._cool -= 1
            return
        if mean > prev * (1 - self.min_improvement) and self.q < self.q_max:
            self.q = min(self.q_max, self.q * self.factor)
            self._cool = self.cooldown
            self.history.append((forward_passes, self.q))


_FACTORIES: dict[str, Callable[[str | None], Scheduler]] = {}


def register(name: str, factory: Callable[[str | None], Scheduler]) -> None:
    """Make ``--scheduler NAME[:ARGS]`` build ``factory(ARGS or None)``."""
    _FACTORIES[name] = factory
    EXTRA_SCHEDULERS.add(name)


def make_schedule(spec: str) -> Scheduler:
    """A schedule from its command-line spelling: ``fixed:4``, ``qscheduler``,
    ``qscheduler:q_min=1,q_max=32,windows=40``, or a registered name."""
    kind, args = parse_scheduler(spec)
    if kind == "fixed":
        return FixedQ(int(args["q"]))
    if kind == "qscheduler":
        return QScheduler(**args)
    return _FACTORIES[kind](spec.partition(":")[2] or None)


# --- learning-rate and eps schedules ------------------------------------------------------------
rate_schedule = _rate_schedule  # re-exported: a multiplier of the budget fraction spent
