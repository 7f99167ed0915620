"""q schedules (fixed, QScheduler, custom) and lr / eps rate schedules."""

import math

import pytest

from hilbench.config import RunConfig, parse_scheduler, rate_schedule
from hilbench.errors import ConfigError
from hilbench.train.schedule import FixedQ, QScheduler, Scheduler, make_schedule, register


def feed(s: QScheduler, losses_per_window: list[float], window: int, q_cost: int = 2) -> list[int]:
    """Feed constant per-window losses, one step at a time; q after each window."""
    fp, step, qs = 0, 0, []
    for loss in losses_per_window:
        end = fp + window
        while fp < end:
            fp += q_cost * s.next_q(step)
            s.observe(step, loss, fp)
            step += 1
        qs.append(s.q)
    return qs


def test_fixed_q_and_parsing():
    assert make_schedule("fixed:8").next_q(123) == 8
    assert isinstance(make_schedule("fixed:1"), FixedQ)
    assert parse_scheduler("qscheduler:q_min=2,q_max=64,min_improvement=0.02") == (
        "qscheduler",
        {"q_min": 2, "q_max": 64, "min_improvement": 0.02},
    )
    s = make_schedule("qscheduler:q_min=2,q_max=16")
    assert isinstance(s, QScheduler) and (s.q_min, s.q_max, s.q) == (2, 16, 2)


@pytest.mark.parametrize(
    "spec", ["fixed:0", "fixed:300", "fixed:x", "qscheduler:q_max=0", "qscheduler:speed=3", "nope"]
)
def test_bad_scheduler_specs_are_config_errors(spec):
    with pytest.raises(ConfigError):
        make_schedule(spec)


def test_qscheduler_keeps_q_while_the_loss_falls():
    s = QScheduler()
    s.start(40_000)
    qs = feed(s, [2.0 * 0.9**i for i in range(20)], s.window)
    assert qs[-1] == 1


def test_qscheduler_doubles_on_a_plateau_with_a_cooldown_and_stops_at_q_max():
    s = QScheduler(q_max=8)
    s.start(40_000)  # windows of 1000 forward passes
    assert s.window == 1000
    qs = feed(s, [1.0] * 12, s.window)
    # window 1 sets the reference, window 2 stalls -> q=2, window 3 is the cooldown,
    # window 4 stalls -> q=4, window 5 cooldown, window 6 -> q=8, then q_max holds
    assert qs[:7] == [1, 2, 2, 4, 4, 8, 8]
    assert qs[-1] == 8
    assert [q for _, q in s.history] == [1, 2, 4, 8]


def test_qscheduler_reacts_to_a_rising_loss_even_in_cooldown():
    s = QScheduler()
    s.start(40_000)
    qs = feed(s, [1.0, 1.0, 1.2, 1.5, 1.9], s.window)
    assert qs == [1, 2, 4, 8, 16]


def test_qscheduler_ignores_non_finite_losses_and_respects_the_minimum_window():
    s = QScheduler(windows=1000)
    s.start(2_000)
    assert s.window == s.min_window == 200
    s.observe(0, math.nan, 2)
    assert s.q == 1


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
