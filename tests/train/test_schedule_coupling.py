"""The QScheduler's rate coupling (issue 29): the rate follows q on a stall, not on a rise."""

import math

import pytest

from hilbench.config import RunConfig, parse_scheduler
from hilbench.errors import ConfigError
from hilbench.train.schedule import QScheduler, make_schedule
from tests.train.test_schedule import feed


def test_parsing_and_the_coupling_rule():
    assert parse_scheduler("qscheduler:couple=1,dim=2368") == (
        "qscheduler",
        {"couple": 1.0, "dim": 2368},
    )
    s = make_schedule("qscheduler:couple=1,dim=2368")
    # eta q / (q + d - 1): doubling from 1 to 2 at d = 2368 grows the rate by 2 * 2368 / 2369
    assert s.coupling(2) / s.coupling(1) == pytest.approx(2 * 2368 / 2369, rel=1e-12)
    assert make_schedule("qscheduler:couple=0.9").coupling(4) == pytest.approx(4**0.9)
    assert make_schedule("qscheduler").coupling(32) == 1.0  # the current rule: off
    for bad in ("qscheduler:couple=-1", "qscheduler:couple=3", "qscheduler:dim=-2"):
        with pytest.raises(ConfigError):
            make_schedule(bad)
    with pytest.raises(ConfigError):
        RunConfig(scheduler="qscheduler:couple=x")


def test_a_stall_doubling_grows_the_rate_with_q():
    plain = QScheduler(q_max=8, lookback=2, warmup=0.0)
    coupled = QScheduler(q_max=8, lookback=2, warmup=0.0, couple=1.0)
    for s in (plain, coupled):
        s.start(40_000)
    qs_plain, qs_coupled = feed(plain, [1.0] * 12), feed(coupled, [1.0] * 12)
    assert qs_plain == qs_coupled and qs_coupled[-1] == 8  # the same q path
    assert plain.lr_scale(8) == 1.0
    assert coupled.lr_scale(8) == 8.0  # three stall doublings: x2 each
    assert {why for _, _, why in coupled.history[1:]} == {"stalled"}


def test_a_rise_doubles_q_but_keeps_the_rate():
    s = QScheduler(couple=1.0, warmup=0.0)
    s.start(40_000)
    assert feed(s, [1.0, 1.2, 1.5, 2.0, 2.5], noise=0.1) == [1, 2, 4, 8, 16]
    assert s.lr_scale(16) == 1.0


def test_the_d_aware_rule_is_a_little_below_linear():
    s = QScheduler(q_max=8, lookback=2, warmup=0.0, couple=1.0, dim=100)
    s.start(40_000)
    feed(s, [1.0] * 12)
    # (8 / 107) / (1 / 100): the rate grows less than q once q is not small against d
    assert s.lr_scale(8) == pytest.approx(8 * 100 / 107, rel=1e-12)
    assert not math.isclose(s.lr_scale(8), 8.0)
