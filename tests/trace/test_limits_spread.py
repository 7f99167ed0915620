"""Limits on a trace with spread durations, two timing sources and many steps.

The known run of the other limit tests has one duration per command, so p99 could read p9 or
the mean and no test would see it. Here each statistic has its own value, computed by numpy
from the durations written; the marginal band is tested at its exact edges.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from trace_helpers import CONFIG, RUN_ATTRS

from hilbench.trace import Trace, TraceWriter
from hilbench.trace.limits import (
    FAIL,
    MARGINAL,
    PASS,
    Limit,
    LimitError,
    LimitFailure,
    LimitResult,
    MarginalWarning,
    check,
    evaluate,
    measure,
)
from hilbench.trace.reader import FINAL_LOSS_WINDOW

N_STEPS = FINAL_LOSS_WINDOW + 20
DEVICE = np.arange(1, 101) * 1e-3  # PROBE on the device: 1..100 ms
HOST = DEVICE * 3 + 0.5e-3  # the same PROBEs seen from the host
APPLY = np.array([2e-3, 4e-3, 9e-3])  # APPLY: modeled only
INSTR = np.array([1000.0, 3000.0])  # EVAL: instruction counts (QEMU -icount)
LOSSES = 2.0 - 0.01 * np.arange(N_STEPS)  # the step loss falls every step


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    path = tmp_path_factory.mktemp("limits") / "spread.h5"
    w = TraceWriter.create(path, RUN_ATTRS, CONFIG)
    for i in range(N_STEPS):
        w.append_step(
            step=i,
            q=1,
            seeds=[i],
            loss_plus=[1],
            loss_minus=[0],
            grads=[0.5],
            coeffs=[1],
            lr=1e-3,
            eps=1,
            batch_seed=i,
            loss=float(LOSSES[i]),
            forward_passes=2 * (i + 1),
            fresh_words=1,
        )
    w.append_eval(10, 22, 0.25, 1.9)
    w.append_eval(20, 42, 0.5, 1.7)
    w.append_eval(30, 62, 0.75, 1.5, split="train")  # not a test evaluation
    w.append_eval(N_STEPS - 1, 2 * N_STEPS, 0.875, 1.25)
    w.append_eval(N_STEPS - 1, 2 * N_STEPS, 0.9, 1.1, split="train")
    for i, (d, h) in enumerate(zip(DEVICE, HOST, strict=True)):
        w.append_timing(i % N_STEPS, "PROBE", float(d), "device")
        w.append_timing(i % N_STEPS, "PROBE", float(h), "host")
    for i, d in enumerate(APPLY):
        w.append_timing(i, "APPLY", float(d), "modeled")
    for i, d in enumerate(INSTR):
        w.append_timing(i, "EVAL", float(d), "instr")
    for _ in range(3):
        w.append_event(5, "retry", "timeout")
    w.append_event(6, "resync", "")
    w.finish("complete", weights_crc=0x1234)
    w.close()
    return Trace.open(path)


def value(trace: Trace, name: str) -> float | None:
    return measure(trace, name)[0]


@pytest.mark.parametrize("pct", [0, 9, 12, 12.5, 50, 90, 99, 99.9, 100])
def test_each_percentile_is_the_one_asked_for(spread: Trace, pct: float) -> None:
    want = float(np.percentile(DEVICE, pct))
    assert value(spread, f"timing.PROBE.p{pct:g}@device") == pytest.approx(want, rel=1e-12)
    assert value(spread, f"timing.PROBE.p{pct:g}@host") == pytest.approx(
        float(np.percentile(HOST, pct)), rel=1e-12
    )


def test_percentiles_differ_from_each_other_here(spread: Trace) -> None:
    stats = ("p9", "p50", "p90", "p99", "p99.9")
    got = [value(spread, f"timing.PROBE.{s}@device") for s in stats]
    assert got == sorted(got) and len(set(got)) == len(stats)


def test_mean_min_max_per_source(spread: Trace) -> None:
    assert value(spread, "timing.PROBE.mean@device") == pytest.approx(DEVICE.mean(), rel=1e-12)
    assert value(spread, "timing.PROBE.min@host") == pytest.approx(HOST.min(), rel=1e-12)
    assert value(spread, "timing.PROBE.max@host") == pytest.approx(HOST.max(), rel=1e-12)
    assert measure(spread, "timing.APPLY.max") == (pytest.approx(APPLY.max()), "s")
    assert measure(spread, "timing.APPLY.p50") == (pytest.approx(float(np.median(APPLY))), "s")


def test_two_sources_must_be_named(spread: Trace) -> None:
    with pytest.raises(LimitError) as e:
        measure(spread, "timing.PROBE.p99")
    assert str(e.value).startswith(
        "PROBE was timed by device, host: 'timing.PROBE.p99' does not say which"
    )
    assert "timing.PROBE.p99@device (durations of different sources are not pooled)" in str(e.value)


def test_a_source_or_command_never_measured_is_none(spread: Trace) -> None:
    assert measure(spread, "timing.PROBE.p99@modeled") == (None, "s")
    assert measure(spread, "timing.WEIGHTS_CRC.p99") == (None, "s")
    assert measure(spread, "timing.APPLY.mean@device") == (None, "s")
    r = evaluate(spread, Limit("timing.PROBE.p99@modeled", high=1.0, units="s"))
    assert r.outcome == FAIL and r.value is None
    assert str(r).startswith("FAIL: timing.PROBE.p99@modeled = not measured, limit x <= 1 s (")


def test_instruction_counts_have_their_own_unit(spread: Trace) -> None:
    assert measure(spread, "timing.EVAL.max") == (3000.0, "instructions")
    assert measure(spread, "timing.EVAL.p50@instr") == (2000.0, "instructions")
    with pytest.raises(LimitError, match="is in 's' but the measurement is in 'instructions'"):
        evaluate(spread, Limit("timing.EVAL.max", high=1.0, units="s"))


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("timing.PROBE", "is not timing.COMMAND.STAT[@SOURCE]"),
        ("timing.PROBE.p99.x@device", "unknown timing statistic 'p99.x'"),
        ("timing..p99@device", "is not timing.COMMAND.STAT[@SOURCE]"),
        ("timing.PROBE.p101@device", "unknown timing statistic 'p101'"),
        ("timing.PROBE.p-1@device", "unknown timing statistic 'p-1'"),
        ("timing.PROBE.pxx@device", "unknown timing statistic 'pxx'"),
        ("timing.PROBE.median@device", "unknown timing statistic 'median'"),
        ("accuracy@ten", "needs a whole number of forward passes"),
        ("final_acc", "unknown measurement 'final_acc'"),
    ],
)
def test_malformed_names_are_refused_in_one_line(spread: Trace, name: str, says: str) -> None:
    with pytest.raises(LimitError) as e:
        measure(spread, name)
    assert says in str(e.value)


def test_run_measurements(spread: Trace) -> None:
    want_train = float(LOSSES[-FINAL_LOSS_WINDOW:].mean())
    assert measure(spread, "train_loss") == (pytest.approx(want_train, rel=1e-12), "nats")
    assert want_train != pytest.approx(float(LOSSES.mean()))  # the window, not the whole run
    assert measure(spread, "final_loss") == (1.25, "nats")  # the last *test* evaluation
    assert measure(spread, "final_accuracy") == (0.875, "fraction")
    assert measure(spread, "forward_passes") == (2 * N_STEPS, "count")
    assert measure(spread, "steps") == (N_STEPS, "count")
    assert measure(spread, "accuracy@41") == (0.25, "fraction")
    assert measure(spread, "accuracy@42") == (0.5, "fraction")  # at N: included
    assert measure(spread, "accuracy@1_000") == (0.875, "fraction")
    assert measure(spread, "accuracy@21") == (None, "fraction")
    assert measure(spread, "events.retry") == (3, "count")
    assert measure(spread, "events.resync") == (1, "count")
    assert measure(spread, "events.reset") == (0, "count")


def band() -> Limit:
    return Limit("x", low=1.0, high=5.0, marginal_low=2.0, marginal_high=4.0)


@pytest.mark.parametrize(
    ("v", "outcome"),
    [
        (0.999, FAIL),
        (1.0, MARGINAL),
        (1.999, MARGINAL),
        (2.0, PASS),
        (3, PASS),
        (4.0, PASS),
        (4.001, MARGINAL),
        (5.0, MARGINAL),
        (5.001, FAIL),
        (math.nan, FAIL),
        (None, FAIL),
        ("3", FAIL),
    ],
)
def test_marginal_band_edges(v: object, outcome: str) -> None:
    assert band().judge(v) == outcome


def test_one_sided_limits_and_marginals() -> None:
    assert Limit("x", low=1.0).judge(1e9) == PASS and Limit("x", low=1.0).judge(0.5) == FAIL
    assert Limit("x", high=1.0).judge(-1e9) == PASS and Limit("x", high=1.0).judge(1.5) == FAIL
    only = Limit("x", marginal_low=2.0)
    assert only.judge(1.0) == MARGINAL and only.judge(2.0) == PASS
    assert only.describe() == "any (marginal below 2)"


def test_describe_and_repr() -> None:
    assert band().describe() == "1 <= x <= 5 (marginal below 2 or above 4)"
    assert Limit("x", low=0.9, units="fraction").describe() == "x >= 0.9 fraction"
    assert Limit("x", high=3, units="s", marginal_high=2).describe() == (
        "x <= 3 s (marginal above 2)"
    )

    def p99_of_probe(trace: Trace) -> float:
        return 0.0

    r = repr(Limit("x", high=1.0, units="s", description="d", measure=p99_of_probe))
    assert r == (
        "Limit('x', high=1.0, units='s', description='d', "
        "measure=test_describe_and_repr.<locals>.p99_of_probe)"
    )
    assert repr(Limit("x", low=0)) == "Limit('x', low=0)"


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({}, "limit on 'x' has no bound"),
        ({"low": math.nan}, "low = nan of limit 'x' is not a number"),
        ({"high": "1"}, "high = '1' of limit 'x' is not a number"),
        ({"marginal_low": None, "marginal_high": math.nan}, "marginal_high = nan"),
        ({"low": 2.0, "high": 1.0}, "has bounds out of order (2 <= x <= 1)"),
        ({"low": 1.0, "marginal_low": 0.5}, "has bounds out of order"),
        ({"marginal_low": 3.0, "marginal_high": 2.0}, "has bounds out of order"),
        ({"high": 1.0, "marginal_high": 2.0}, "has bounds out of order"),
    ],
)
def test_bad_bounds_are_refused(kw: dict, says: str) -> None:
    with pytest.raises(LimitError) as e:
        Limit("x", **kw)
    assert says in str(e.value)


def test_equal_bounds_are_allowed() -> None:
    lim = Limit("x", low=1.0, marginal_low=1.0, marginal_high=1.0, high=1.0)
    assert lim.judge(1.0) == PASS


def test_check_counts_failures_records_and_warns(spread: Trace) -> None:
    props: list[tuple[str, object]] = []
    limits = (
        Limit("timing.PROBE.p99@device", high=0.05, units="s"),  # p99 = 99 ms: fails
        Limit("timing.PROBE.p9@device", high=0.05, units="s"),  # p9 = 9.9 ms: passes
        Limit("events.retry", high=0, units="count"),  # 3: fails
        Limit("final_accuracy", low=0.5, marginal_low=0.9),  # 0.875: marginal
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(LimitFailure) as e:
            check(spread, *limits, record=lambda k, v: props.append((k, v)))
    text = str(e.value)
    assert text.startswith("2 of 4 limits failed:\n  FAIL: timing.PROBE.p99@device = 0.09901 s")
    assert "\n  FAIL: events.retry = 3 count, limit x <= 0 count" in text
    assert "p9@device" not in text
    assert [r.outcome for r in e.value.results] == [FAIL, PASS, FAIL, MARGINAL]
    assert len(props) == 12
    assert props[0] == ("hilbench.limit.timing.PROBE.p99@device", FAIL)
    assert props[1][0].endswith(".value") and props[1][1] == pytest.approx(0.09901)
    assert props[2] == ("hilbench.limit.timing.PROBE.p99@device.limit", "x <= 0.05 s")
    (w,) = [c for c in caught if issubclass(c.category, MarginalWarning)]
    assert str(w.message).startswith("MARGINAL: final_accuracy = 0.875 fraction")


def test_check_one_failure_opens_the_path(spread: Trace) -> None:
    with pytest.raises(LimitFailure) as e:
        check(str(spread.path), Limit("steps", low=10**6))
    assert str(e.value).startswith("limit failed:\n  FAIL: steps = 70 count")
    assert check(spread.path, Limit("steps", low=1))[0].passed


def test_results_of_unmeasured_values() -> None:
    r = LimitResult(Limit("x", high=1.0, units="s"), None, "s", FAIL, Path("t.h5"), "r1")
    assert str(r) == "FAIL: x = not measured, limit x <= 1 s (trace t.h5, run r1)"
    assert r.properties()[1] == ("hilbench.limit.x.value", "")
    assert not r.passed and repr(r) == f"<LimitResult {r}>"


def test_custom_measures_are_floats_and_nan_is_unmeasured(spread: Trace) -> None:
    r = evaluate(spread, Limit("n", low=0, measure=lambda t: 7, units="items"))
    assert r.value == 7.0 and isinstance(r.value, float) and r.units == "items"
    nan = evaluate(spread, Limit("n", low=0, measure=lambda t: math.nan))
    assert nan.value is None and nan.outcome == FAIL


def test_two_limits_one_failed_counts_both(spread: Trace) -> None:
    with pytest.raises(LimitFailure) as e:
        check(spread, Limit("steps", low=1), Limit("steps", high=1))
    assert str(e.value).startswith("1 of 2 limits failed:\n")


@pytest.mark.parametrize(
    ("make", "fix"),
    [
        (lambda: Limit("x"), "give low and/or high (and optionally marginal_low/marginal_high)"),
        (lambda: Limit("x", low="a"), "give numbers in the measurement's units"),
        (lambda: Limit("x", low=2, high=1), "use low <= marginal_low <= marginal_high <= high"),
    ],
)
def test_refusals_say_how_to_fix_them(make, fix: str) -> None:
    with pytest.raises(LimitError) as e:
        make()
    assert e.value.fix == fix


def test_measurement_refusals_say_how_to_fix_them(spread: Trace) -> None:
    cases = {
        "accuracy@x": "write e.g. accuracy@10000",
        "timing.PROBE": "write e.g. timing.PROBE.p99@device",
        "timing.PROBE.avg@device": "use p50, p90, p99 or any pNN from 0 to 100 (p99.9), mean, "
        "min or max",
        "nope": "use one of final_accuracy, final_loss, train_loss, forward_passes, steps, "
        "accuracy@N, timing.COMMAND.STAT@SOURCE, events.KIND, or pass measure=callable",
    }
    for name, fix in cases.items():
        with pytest.raises(LimitError) as e:
            measure(spread, name)
        assert e.value.fix == fix, name
    with pytest.raises(LimitError) as e:
        evaluate(spread, Limit("steps", low=1, units="s"))
    assert e.value.fix == "give the bounds in count"


def test_repr_of_a_callable_object_measure() -> None:
    class P99:
        def __call__(self, trace: Trace) -> float:
            return 0.0

    assert repr(Limit("x", high=1, measure=P99())) == "Limit('x', high=1, measure=P99)"
