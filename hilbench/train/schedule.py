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
after the step, ``observe_step(StepInfo)``, which by default calls ``observe(step, loss,
forward_passes)`` with the step's mean training loss in nats and the forward passes spent so
far (override ``observe_step`` to see the projected gradients, lr and eps too).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from hilbench.config import EXTRA_SCHEDULERS, parse_scheduler
from hilbench.config import rate_schedule as _rate_schedule
from hilbench.errors import ConfigError


class StepInfo(NamedTuple):  # a tuple: one is built per step
    """What the trainer knows after a step."""

    step: int
    q: int
    loss: float  # mean training loss of the step, nats
    forward_passes: int  # spent so far, this step included
    lr: float
    eps: int
    grads: np.ndarray  # projected gradients g_k, nats per LSB


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

    def observe_step(self, info: StepInfo) -> None:
        """Everything about the step just taken; by default passed on to ``observe``."""
        self.observe(info.step, info.loss, info.forward_passes)


def overrides(schedule: Scheduler, method: str) -> bool:
    """Whether ``schedule``'s class (or the instance) replaces the base Scheduler's ``method``
    (the trainer skips the base's no-op calls on every step)."""
    if method in getattr(schedule, "__dict__", ()):
        return True
    return getattr(type(schedule), method, None) is not getattr(Scheduler, method)


class FixedQ(Scheduler):
    """The same q every step."""

    def __init__(self, q: int) -> None:
        self.q = q
        self.name = f"fixed:{q}"

    def next_q(self, step: int) -> int:
        return self.q


class QScheduler(Scheduler):
    """q grows when the training loss stops falling; the learning rate warms up, then stays.

    The budget is cut into ``windows`` windows of forward passes (each at least ``min_steps``
    steps, so a window at large q still holds enough steps to average). At the end of every
    window the scheduler has the window's mean training loss ``m`` and its standard error.
    q is multiplied by ``factor`` (up to ``q_max``) when

    - the loss *stalled*: ``m`` is not below the mean of the window ``lookback`` windows
      earlier (no progress at all over that horizon), or
    - the loss *rose*: ``m`` exceeds the previous window's mean by more than ``z_rise``
      standard errors (the rate is unstable at this q), or
    - (off by default: ``early`` > 0) within the first ``early`` fraction of the budget, the
      window realised less than ``rho_min`` of the first-order decrease its estimates promised
      (``sum_steps (lr/q) sum_k g_k^2``): an early sign of a rate too large for q. It reacts
      faster to a rate 3x too large but also fires on slow fine-tuning runs; see
      docs/results.md.

    The learning rate is warmed up over the first ``warmup`` fraction of the budget (default
    0.1): 1/3 of the given rate for the first half of it, 2/3 for the second half, then the
    rate itself (``lr_scale``; ``warmup=0`` turns it off). The window tests cannot react before
    two windows (5% of the budget) have passed, and a rate 3x too large wrecks pre-trained
    weights in fewer steps than that (docs/results.md); during the warm-up a rate that is too
    large shows up while it is still only a little too large, so doubling q catches it before
    the damage is done. During the warm-up the test is stricter: every window must *fall*, by
    at least ``z_fall`` standard errors (default 1; ``None`` turns it off), since early in a run
    a loss falls fast at any rate that is not too large. A window that hovers or rises there
    means the rate is already at or past its limit for q at this warm-up level, and the full
    rate would be 1.5x or 3x more; so q doubles (why "warm-up", or "rose") and the rate *stays
    at that level* for the rest of the run. Doubling q about doubles the rate q tolerates
    (the tuned rate grows like q^0.9), so the level that was too large for q is about right
    for 2q, where going on to the full rate would be too large for 2q as well. At a rate that
    suits q = 1 none of this fires (no run at a tuned rate did, on four tasks), so it costs a
    healthy run nothing; docs/results/qscheduler-rules.md has the measurements.

    The rate can follow q (``couple`` > 0, off by default): on a doubling for a *stall* (the
    loss no longer falls: the noise, not the rate, limits progress) the rate is multiplied by
    ``c(2q) / c(q)``, ``c(q) = (q / (q + dim - 1))^couple`` -- the coupling rule
    eta q / (q + d - 1) with ``couple = 1`` and ``dim`` = d, about linear in q for d >> q
    (``dim = 0``: exactly ``q^couple``; the tuned-rate law of docs/results.md is
    ``couple = 0.9``). A doubling for a rise or during the warm-up keeps the rate (the rate is
    what is too large there, and 2q at the same rate is what fixes it). With ``couple = 1`` a
    stall-doubling costs no progress per forward pass (the estimate's noise per forward pass
    is the same at q and 2q when the rate doubles with q).

    Why this rule. With ZO-SGD the largest stable rate grows about linearly with q, so a rate
    too large for q = 1 shows up as a loss that rises or hovers, and doubling q until it falls
    again is the fix; once it falls, q stays. A *slowly* falling loss is not a stall: growing q
    at a fixed rate slows progress per forward pass (the tuned rate grows like q^0.9, so a
    fixed rate is increasingly too small), which in our measurements costs more than the lower
    noise gains. Comparing with ``lookback`` windows back (not the previous window) makes the
    test robust to window noise, and asking only "did it fall at all" means that a larger q at
    the same rate, which falls more slowly per forward pass, does not itself look like a
    plateau. After a change one window is a ``cooldown`` (it straddles two q's), unless the
    loss rose. Nothing depends on the loss scale or the task length: windows are fractions of
    the budget and the tests are relative to the loss's own noise.
    """

    def __init__(
        self,
        q_min: int = 1,
        q_max: int = 32,
        *,
        windows: int = 40,
        lookback: int = 4,
        z_rise: float = 2.0,
        early: float = 0.0,
        rho_min: float = 0.01,
        z_rho: float = 0.0,
        rho_factor: int = 0,
        factor: int = 2,
        cooldown: int = 1,
        min_steps: int = 100,
        min_window: int = 200,
        warmup: float = 0.1,
        z_fall: float | None = 1.0,
        couple: float = 0.0,
        dim: int = 0,
    ) -> None:
        if not 1 <= q_min <= q_max <= 256:
            raise ConfigError(
                f"qscheduler bounds q_min={q_min}, q_max={q_max} are out of range",
                "use 1 <= q_min <= q_max <= 256",
            )
        if factor < 2 or windows < 2 or cooldown < 0 or min_steps < 2 or lookback < 1:
            raise ConfigError(
                f"qscheduler factor={factor}, windows={windows}, cooldown={cooldown}, "
                f"min_steps={min_steps}, lookback={lookback} invalid",
                "use factor >= 2, windows >= 2, cooldown >= 0, min_steps >= 2, lookback >= 1",
            )
        if rho_factor == 1 or rho_factor < 0 or z_rho < 0:
            raise ConfigError(
                f"qscheduler rho_factor={rho_factor}, z_rho={z_rho} invalid",
                "use rho_factor >= 2 (0: factor) and z_rho >= 0",
            )
        if not 0.0 <= warmup <= 0.5:
            raise ConfigError(
                f"qscheduler warmup={warmup} is out of range",
                "use a fraction of the budget in [0, 0.5] (0: no warm-up)",
            )
        if z_fall is not None and not 0.0 <= z_fall <= 10.0:
            raise ConfigError(
                f"qscheduler z_fall={z_fall} is out of range",
                "use a number of standard errors in [0, 10] (warmup=0 turns the test off)",
            )
        if not 0.0 <= couple <= 2.0 or dim < 0:
            raise ConfigError(
                f"qscheduler couple={couple}, dim={dim} invalid",
                "use couple in [0, 2] (0: the rate does not follow q; 1: linear) and dim >= 0 "
                "(0: the dimension is much larger than q)",
            )
        self.couple, self.dim = couple, dim
        self._rate = 1.0  # the coupling's multiplier: c(q) / c(q_min) over the stall doublings
        self.q_min, self.q_max, self.q = q_min, q_max, q_min
        self.windows, self.lookback, self.z_rise, self.factor = windows, lookback, z_rise, factor
        self.cooldown, self.min_steps, self.min_window = cooldown, min_steps, min_window
        self.early, self.rho_min, self.warmup, self.z_fall = early, rho_min, warmup, z_fall
        self.z_rho = z_rho
        self.rho_factor = rho_factor or factor  # q's multiplier on an "inefficient" change
        self._spent = 0  # forward passes of the steps observed so far
        self.budget = 0
        self.name = "qscheduler"
        self.window = min_window
        self._start = 0
        self._losses: list[float] = []
        self._promised = 0.0
        self._means: list[tuple[float, float]] = []  # (mean, squared standard error)
        self._prev_loss: float | None = None
        self._cool = 0
        self._cap = 1.0  # the warm-up level the rate stays at after a change during it
        # (forward passes, q, why) at every change; why: "start", "stalled", "rose",
        # "inefficient", "warm-up"
        self.history: list[tuple[int, int, str]] = [(0, q_min, "start")]

    def start(self, budget: int) -> None:
        self.budget = budget
        self.window = max(self.min_window, budget // self.windows)

    def next_q(self, step: int) -> int:
        return self.q

    def _warm_level(self, spent: int) -> float:
        """The warm-up's multiplier after ``spent`` forward passes: 1/3, 2/3, then 1."""
        if self.budget <= 0 or spent >= self.warmup * self.budget:
            return 1.0
        return (1 + int(2 * spent / (self.warmup * self.budget))) / 3

    def coupling(self, q: int) -> float:
        """The rate's growth with q on a stall: ``(q / (q + dim - 1))^couple`` (the coupling
        rule eta q / (q + d - 1); ``dim = 0``: d >> q, so ``q^couple``), 1 if ``couple = 0``."""
        if self.couple == 0.0:
            return 1.0
        x = q / (q + self.dim - 1) if self.dim > 0 else float(q)
        return x**self.couple

    def lr_scale(self, q: int) -> float:
        """1/3, then 2/3 of the rate over the two halves of the warm-up, then 1; held at the
        level where the warm-up's loss stopped falling, if it did; times the coupling's growth
        over the stall doublings so far (``couple`` > 0)."""
        return min(self._warm_level(self._spent), self._cap) * self._rate

    def observe_step(self, info: StepInfo) -> None:
        # the warm-up level this step ran at (lr_scale saw the forward passes before it)
        level = self._warm_level(self._spent)
        self._spent = info.forward_passes
        if math.isfinite(info.loss):
            self._losses.append(info.loss)
        if math.isfinite(info.lr) and len(info.grads):
            self._promised += info.lr / info.q * float(np.sum(np.square(info.grads)))
        span = info.forward_passes - self._start
        if span < self.window or len(self._losses) < self.min_steps:
            return
        self._start = info.forward_passes
        x = np.asarray(self._losses)
        promised, self._promised = self._promised, 0.0
        self._losses = []
        self._means.append((float(x.mean()), float(x.var(ddof=1)) / len(x)))
        if len(self._means) < 2:
            return
        (m, v), (m1, v1) = self._means[-1], self._means[-2]
        rose = m - m1 > self.z_rise * math.sqrt(v + v1)
        if self._cool > 0 and not rose:
            self._cool -= 1
            return
        stalled = len(self._means) > self.lookback and m >= self._means[-1 - self.lookback][0]
        # the window realised under rho_min of the first-order decrease its estimates promised,
        # even z_rho standard errors in its favour
        inefficient = (
            info.forward_passes <= self.early * self.budget
            and promised > 0
            and m1 - m + self.z_rho * math.sqrt(v + v1) < self.rho_min * promised
        )
        # during the warm-up the loss must fall, by at least z_fall standard errors a window
        warming = level < 1.0
        slow = warming and self.z_fall is not None and m1 - m < self.z_fall * math.sqrt(v + v1)
        if (rose or stalled or inefficient or slow) and self.q < self.q_max:
            grow = self.rho_factor if inefficient and not (rose or stalled) else self.factor
            old_q, self.q = self.q, min(self.q_max, self.q * grow)
            if (stalled or inefficient) and not (rose or slow):  # signal-limited: rate follows q
                self._rate *= self.coupling(self.q) / self.coupling(old_q)
            self._cool = self.cooldown
            why = (
                "rose"
                if rose
                else "stalled"
                if stalled
                else "inefficient"
                if inefficient
                else "warm-up"
            )
            self.history.append((info.forward_passes, self.q, why))
            if warming:  # the rate is too large for q already at this level: stay there
                self._cap = min(self._cap, level)


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
