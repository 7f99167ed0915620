"""Limits with units and a marginal band, judged on a trace."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from trace_helpers import write_known_run

from hilbench.trace import Trace
from hilbench.trace.limits import (
    FAIL,
    MARGINAL,
    PASS,
    Limit,
    LimitError,
    LimitFailure,
    MarginalWarning,
    check,
    measure,
)

# known run: final test accuracy 0.625, 12 forward passes, 3 steps, one retry event,
# PROBE 10 ms (device), APPLY 2 ms (modeled), EVAL 0.5 s (host)


def test_a_pass_returns_results_and_records_properties(known_trace: Path) -> None:
    props: list[tuple[str, object]] = []
    results = check(
        known_trace,
        Limit("final_accuracy", low=0.6, units="fraction"),
        Limit("forward_passes", low=12, high=12),
        record=lambda k, v: props.append((k, v)),
    )
    assert [r.outcome for r in results] == [PASS, PASS]
    assert results[0].value == 0.625 and results[0].units == "fraction"
    assert ("hilbench.limit.final_accuracy", "PASS") in props
    assert ("hilbench.limit.final_accuracy.value", 0.625) in props
    assert ("hilbench.limit.final_accuracy.limit", "x >= 0.6 fraction") in props


def test_a_failure_names_the_value_the_limit_and_the_trace(known_trace: Path) -> None:
    with pytest.raises(LimitFailure) as ei:
        check(
            Trace.open(known_trace),
            Limit("final_accuracy", low=0.9, units="fraction", marginal_low=0.92),
            Limit("steps", high=100),
            Limit("timing.PROBE.p99@device", high=0.005, units="s"),
        )
    msg = str(ei.value)
    assert msg.startswith("2 of 3 limits failed:")
    assert (
        "FAIL: final_accuracy = 0.625 fraction, limit x >= 0.9 fraction (marginal below 0.92) "
        f"(trace {known_trace}, run 0000)" in msg
    )
    assert "FAIL: timing.PROBE.p99@device = 0.01 s, limit x <= 0.005 s" in msg
    assert [r.outcome for r in ei.value.results] == [FAIL, PASS, FAIL]


def test_a_marginal_pass_warns(known_trace: Path) -> None:
    with pytest.warns(MarginalWarning, match=r"MARGINAL: final_accuracy = 0.625 fraction"):
        (r,) = check(known_trace, Limit("final_accuracy", low=0.6, marginal_low=0.7))
    assert r.outcome == MARGINAL and r.passed
    with pytest.warns(MarginalWarning, match="marginal above 0.001"):
        check(known_trace, Limit("timing.APPLY.mean", high=0.01, marginal_high=0.001))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(known_trace, Limit("final_accuracy", low=0.6, marginal_low=0.62))


def test_named_measurements(known_trace: Path) -> None:
    tr = Trace.open(known_trace)
    assert measure(tr, "accuracy@11") == (None, "fraction")  # test eval only at 12
    assert measure(tr, "accuracy@12") == (0.625, "fraction")
    assert measure(tr, "events.retry") == (1, "count")
    assert measure(tr, "events.reset") == (0, "count")
    assert measure(tr, "timing.EVAL.max") == (0.5, "s")  # one source: may be left out
    assert measure(tr, "timing.NOPE.p50") == (None, "s")
    assert measure(tr, "final_loss") == (1.3, "nats")


def test_unmeasured_values_fail(known_trace: Path) -> None:
    with pytest.raises(LimitFailure, match="accuracy@1 = not measured"):
        check(known_trace, Limit("accuracy@1", low=0.1))
    with pytest.raises(LimitFailure, match="custom = not measured"):
        check(known_trace, Limit("custom", low=0, measure=lambda tr: float("nan")))


def test_custom_measure(known_trace: Path) -> None:
    (r,) = check(
        known_trace, Limit("q_max", high=3, units="count", measure=lambda tr: tr.steps["q"].max())
    )
    assert (r.value, r.outcome) == (3.0, PASS)


def test_bad_limits_are_refused_clearly(tmp_path: Path, known_trace: Path) -> None:
    with pytest.raises(LimitError, match="has no bound"):
        Limit("final_accuracy")
    with pytest.raises(LimitError, match="out of order"):
        Limit("final_accuracy", low=0.9, marginal_low=0.8)
    with pytest.raises(LimitError, match="is in '%' but the measurement is in 'fraction'"):
        check(known_trace, Limit("final_accuracy", low=90, units="%"))
    with pytest.raises(LimitError, match="unknown measurement 'accuracy'"):
        check(known_trace, Limit("accuracy", low=0.5))
    with pytest.raises(LimitError, match="unknown timing statistic 'p999x'"):
        check(known_trace, Limit("timing.PROBE.p999x", high=1))
    path = tmp_path / "two.h5"
    write_known_run(path)
    tr = Trace.open(path)
    tr.timing["command"][:] = "PROBE"  # one command, three sources
    with pytest.raises(LimitError, match=r"PROBE was timed by device, modeled, host.*@device"):
        check(tr, Limit("timing.PROBE.p99", high=1))
