"""q schedules (fixed, QScheduler, custom) and lr / eps rate schedules."""

import math

import numpy as np
import pytest

from hilbench.config import RunConfig, parse_scheduler, rate_schedule
from hilbench.errors import ConfigError
from hilbench.train.schedule import (
    FixedQ,
    QScheduler,
    Scheduler,
    StepInfo,
    make_schedule,
    register,
)


def feed(s: QScheduler, window_losses: list[float], noise: float = 0.0, g: float = 1e-4):
    """Feed one window per entry (loss = entry +- noise, alternating; projected gradients g,
    so each step promises 100 * g^2 nats); q after each window."""
    fp, step, qs = 0, 0, []
    for loss in window_losses:
        end = fp + max(s.window, 2 * s.q * s.min_steps)
        while fp < end:
            q = s.next_q(step)
            fp += 2 * q
            value = loss + (noise if step % 2 else -noise)
            s.observe_step(StepInfo(step, q, value, fp, 100.0, 2, np.full(q, g)))
            step += 1
        qs.append(s.q)
    return qs


def test_fixed_q_and_parsing():
    assert make_schedule("fixed:8").next_q(123) == 8
    assert isinstance(make_schedule("fixed:1"), FixedQ)
    assert parse_scheduler("qscheduler:q_min=2,q_max=64,z_rise=3") == (
        "qscheduler",
        {"q_min": 2, "q_max": 64, "z_rise": 3.0},
    )
    s = make_schedule("qscheduler:q_min=2,q_max=16")
    assert isinstance(s, QScheduler) and (s.q_min, s.q_max, s.q) == (2, 16, 2)


@pytest.mark.parametrize(
    "spec", ["fixed:0", "fixed:300", "fixed:x", "qscheduler:q_max=0", "qscheduler:speed=3", "nope"]
)
def test_bad_scheduler_specs_are_config_errors(spec):
    with pytest.raises(ConfigError):
        make_schedule(spec)


def test_qscheduler_keeps_q_while_the_loss_falls_even_slowly():
    s = QScheduler()
    s.start(40_000)
    # fast during the warm-up (the first 4 windows), then 0.001 a window (0.1 standard errors)
    losses = [1.4 - 0.1 * i for i in range(4)] + [1.0 - 0.001 * i for i in range(36)]
    qs = feed(s, losses, noise=0.2)
    assert qs[-1] == 1 and len(s.history) == 1


def test_qscheduler_doubles_on_a_plateau_with_a_cooldown_and_stops_at_q_max():
    s = QScheduler(q_max=8, lookback=2, early=0.0)
    s.start(40_000)
    assert s.window == 1000
    qs = feed(s, [1.0] * 12)
    # windows 1-2 build history, window 3 equals window 1 -> q=2, window 4 is the cooldown,
    # window 5 -> q=4, window 6 cooldown, window 7 -> q=8, then q_max holds
    assert qs[:8] == [1, 1, 2, 2, 4, 4, 8, 8]
    assert qs[-1] == 8
    assert [(q, why) for _, q, why in s.history] == [
        (1, "start"),
        (2, "stalled"),
        (4, "stalled"),
        (8, "stalled"),
    ]


def test_qscheduler_doubles_early_when_the_loss_falls_far_less_than_promised():
    """(Optional rule.) In the first quarter of the budget, a window that realises under 1% of
    the first-order decrease its estimates promised means the rate is too large for q."""
    s = QScheduler(early=0.25)
    s.start(40_000)
    # each window promises 500 steps * 100 * 0.01^2 = 5 nats; the loss falls 0.02 (0.4%)
    qs = feed(s, [2.0 - 0.02 * i for i in range(6)], g=0.01)
    assert qs[1] == 2 and s.history[1][2] == "inefficient"
    late = QScheduler(early=0.25)
    late.start(4_000)  # the same windows are now past the first quarter
    late.window = 1000
    assert feed(late, [2.0 - 0.02 * i for i in range(6)], g=0.01)[-1] == 1


def test_the_efficiency_test_counts_the_noise_in_the_windows_favour_and_can_jump_q():
    """With z_rho, a window fires only if even z_rho standard errors more of decrease would
    stay under rho_min of the promise; rho_factor is q's multiplier on such a change."""
    # each window promises 5 nats (see above) and falls 0.3 (6%): under rho_min = 0.1
    losses = [2.0 - 0.3 * i for i in range(4)]

    def first_change(noise: float, **kw) -> tuple[int, int, str]:
        s = QScheduler(early=0.25, rho_min=0.1, warmup=0.0, **kw)
        s.start(40_000)
        feed(s, losses, noise=noise, g=0.01)
        return s.history[1] if len(s.history) > 1 else (0, 1, "none")

    assert first_change(0.0, z_rho=2.0)[1:] == (2, "inefficient")
    # alternating +-3 around the mean: a standard error of 3 / sqrt(500) per window, so 2 of
    # them in the window's favour (0.38) lift its decrease over the 0.5 nats asked
    assert first_change(3.0, z_rho=2.0)[2] != "inefficient"
    assert first_change(3.0, z_rho=0.0)[1:] == (2, "inefficient")
    assert first_change(0.0, z_rho=2.0, rho_factor=4)[1:] == (4, "inefficient")
    # a stall still doubles by factor, whatever rho_factor says
    s = QScheduler(q_max=8, lookback=2, rho_factor=4)
    s.start(40_000)
    feed(s, [1.0] * 4)
    assert s.history[1][1:] == (2, "stalled")
    assert make_schedule("qscheduler:z_rho=2,rho_factor=4").rho_factor == 4
    with pytest.raises(ConfigError):
        QScheduler(rho_factor=1)


def test_qscheduler_warms_the_rate_up_over_the_first_tenth_of_the_budget():
    s = QScheduler()
    s.start(12_000)
    scales = {}
    fp = 0
    for step in range(700):
        scales[fp] = s.lr_scale(s.next_q(step))
        fp += 2
        s.observe_step(StepInfo(step, 1, 1.0, fp, 100.0, 2, np.zeros(1)))
    # 1/3 of the rate for the first 600 forward passes, 2/3 up to 1,200, then the rate itself
    assert scales[0] == scales[598] == pytest.approx(1 / 3)
    assert scales[600] == scales[1198] == pytest.approx(2 / 3)
    assert scales[1200] == scales[1398] == 1.0
    off = QScheduler(warmup=0.0)
    off.start(12_000)
    assert off.lr_scale(1) == 1.0
    assert make_schedule("qscheduler:warmup=0.2").warmup == 0.2
    with pytest.raises(ConfigError):
        QScheduler(warmup=0.8)


def test_qscheduler_doubles_q_and_holds_the_rate_when_the_warm_up_loss_stops_falling():
    """In the first ``warmup`` of the budget every window must fall by at least ``z_fall``
    standard errors: a loss that hovers (or rises) while the rate is still being raised means
    the rate is too large for q already at this level, so q doubles and the rate stays at the
    level (the full rate would be 1.5x more)."""
    s = QScheduler()
    s.start(40_000)  # windows of 1,000 forward passes, warm-up over the first 4,000
    assert s.lr_scale(1) == pytest.approx(1 / 3)
    # the loss falls 0.1 a window (noise 0.2 -> one standard error of a difference ~ 0.013),
    # then hovers at 0.7 in the fourth window (at 2/3 of the rate): q doubles at its end
    assert feed(s, [0.9, 0.8, 0.7, 0.7], noise=0.2) == [1, 1, 1, 2]
    assert s.history[1] == (4000, 2, "warm-up")
    assert s.lr_scale(2) == pytest.approx(2 / 3)  # past the warm-up, still 2/3
    feed(s, [0.6 - 0.01 * i for i in range(10)], noise=0.2)
    assert s.lr_scale(2) == pytest.approx(2 / 3) and s.q == 2
    # a fall of less than one standard error also counts as not falling
    slow = QScheduler()
    slow.start(40_000)
    assert feed(slow, [0.9, 0.8, 0.795], noise=0.2)[-1] == 2
    # a rise during the warm-up holds the rate too (here in its first half, at 1/3)
    rise = QScheduler()
    rise.start(40_000)
    assert feed(rise, [1.0, 1.5], noise=0.1) == [1, 2]
    assert rise.history[1][2] == "rose"
    feed(rise, [1.4 - 0.1 * i for i in range(6)], noise=0.1)
    assert rise.lr_scale(2) == pytest.approx(1 / 3)
    # after the warm-up, hovering is left to the stall test (4 windows back), the rate to 1
    late = QScheduler()
    late.start(40_000)
    assert feed(late, [1.5 - 0.1 * i for i in range(6)] + [0.9, 0.9], noise=0.2)[-1] == 1
    assert late.lr_scale(1) == 1.0
    off = QScheduler(z_fall=None)
    off.start(40_000)
    assert feed(off, [0.9, 0.8, 0.7, 0.7], noise=0.2)[-1] == 1
    assert off.lr_scale(1) == 1.0


def test_qscheduler_acts_at_once_on_a_rising_loss_even_in_cooldown():
    s = QScheduler()
    s.start(40_000)
    assert feed(s, [1.0, 1.2, 1.5, 2.0, 2.5], noise=0.1) == [1, 2, 4, 8, 16]
    assert {why for _, _, why in s.history[1:]} == {"rose"}


def test_qscheduler_windows_hold_enough_steps_and_ignore_non_finite_losses():
    s = QScheduler(min_steps=50, q_min=8)
    s.start(2_000)
    assert s.window == 200
    s.observe_step(StepInfo(0, 8, math.nan, 16, 100.0, 2, np.zeros(8)))
    for step in range(1, 40):  # 40 steps of q=8: 640 forward passes, fewer than 50 steps
        s.observe_step(StepInfo(step, 8, 1.0, 16 * (step + 1), 100.0, 2, np.full(8, 0.01)))
    assert s._means == [] and s.q == 8


def test_custom_schedulers_register_under_a_name():
    class Every(Scheduler):
        def __init__(self, arg):
            self.name = f"every:{arg}"
            self.q = int(arg or 3)

        def next_q(self, step):
            return self.q

    register("every", Every)
    assert parse_scheduler("every:5") == ("every", {})
    assert make_schedule("every:5").next_q(0) == 5
    RunConfig(scheduler="every:5")  # a registered name validates


def test_rate_schedules():
    assert rate_schedule("constant")(0.7) == 1.0
    cos = rate_schedule("cosine:0.1")
    assert cos(0.0) == pytest.approx(1.0) and cos(1.0) == pytest.approx(0.1)
    assert rate_schedule("linear:0.5")(0.5) == pytest.approx(0.75)
    st = rate_schedule("step:0.5@0.5,0.1@0.8")
    assert (st(0.2), st(0.6), st(0.9)) == (1.0, 0.5, 0.1)
    for bad in ("warp", "cosine:x", "step:", "step:0.5"):
        with pytest.raises(ConfigError):
            rate_schedule(bad)


def test_qscheduler_decisions_need_only_losses_so_a_resume_rebuilds_them():
    """A resumed run replays the scheduler from logged losses (no projected gradients): the
    default rule must decide the same."""
    full, bare = QScheduler(), QScheduler()
    for s in (full, bare):
        s.start(20_000)
    rng = np.random.default_rng(0)
    fp = 0
    for step in range(4000):
        q = full.next_q(step)
        assert bare.next_q(step) == q
        fp += 2 * q
        loss = 1.0 + 0.3 * rng.standard_normal() + (0.5 if 1500 < step < 2500 else 0.0)
        full.observe_step(StepInfo(step, q, loss, fp, 100.0, 2, rng.standard_normal(q)))
        bare.observe_step(StepInfo(step, q, loss, fp, math.nan, 0, np.zeros(0)))
    assert full.history == bare.history and len(full.history) > 1


def test_the_trainer_skips_only_the_base_schedulers_no_op_calls() -> None:
    from hilbench.train.schedule import FixedQ, QScheduler, Scheduler, overrides

    fixed = FixedQ(4)
    assert not overrides(fixed, "lr_scale") and not overrides(fixed, "observe_step")
    assert not overrides(fixed, "observe")

    class Watching(Scheduler):
        def observe(self, step: int, loss: float, forward_passes: int) -> None:
            pass

    assert overrides(Watching(), "observe") and not overrides(Watching(), "lr_scale")
    q = QScheduler()
    assert overrides(q, "lr_scale") and overrides(q, "observe_step")
    fixed.observe_step = lambda info: None  # an instance's own method counts too
    assert overrides(fixed, "observe_step")
