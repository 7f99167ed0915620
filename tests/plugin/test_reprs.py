"""Every object a test touches prints as one short line: what it is, its trace and run, the key
figures; never the model blob, the tables or the whole configuration."""

from __future__ import annotations

import re

import pytest

from hilbench import session
from hilbench.config import RunConfig
from hilbench.pytest_plugin import SessionOutcome
from hilbench.trace import Trace
from hilbench.trace.limits import Limit, LimitResult, evaluate
from hilbench.trace.replay import replay

NOISE = ("\\x", "b'", "config_json", "PosixPath", "array(", "units", "{")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A real 200-forward-pass run on the in-process twin, and its trace."""
    path = tmp_path_factory.mktemp("reprs") / "run.h5"
    config = RunConfig(budget=200, scheduler="fixed:2", trace=path)
    result = session.run(config, target=session.direct_target())
    return result, Trace.open(path)


def short(text: str, path) -> None:
    assert "\n" not in text
    assert len(text) < len(str(path)) + 120, text
    for noise in NOISE:
        assert noise not in text, f"{noise!r} in {text}"


def test_run_result(finished):
    result, _ = finished
    text = repr(result)
    short(text, result.trace_path)
    assert text == (
        f"<RunResult run 0000 of {result.trace_path}: accuracy {result.final_accuracy:.2%}, "
        f"200 forward passes, {result.steps} steps>"
    )


def test_trace(finished):
    _, trace = finished
    text = repr(trace)
    short(text, trace.path)
    assert text == (
        f"<Trace run 0000 of {trace.path}: complete, mlp on digits, fixed:2, emulate, "
        f"{trace.n_steps} steps, 200 forward passes, accuracy {trace.final_accuracy:.2%}>"
    )
    assert trace.model_blob and len(trace.model_blob) > 1000  # what it leaves out is there


def test_session_outcome(finished):
    result, trace = finished
    outcome = SessionOutcome(result, trace, replay(trace))
    text = repr(outcome)
    short(text, trace.path)
    assert text == (
        f"<SessionOutcome run 0000 of {trace.path}: accuracy {result.final_accuracy:.2%}, "
        "200 forward passes, replay matches>"
    )


def test_limit_reads_like_the_call_that_made_it():
    limit = Limit("final_accuracy", low=0.9, units="fraction", marginal_low=0.92)
    assert repr(limit) == "Limit('final_accuracy', low=0.9, units='fraction', marginal_low=0.92)"
    assert eval(repr(limit)) == limit

    def steps_per_pass(trace):
        return trace.n_steps / trace.forward_passes

    custom = Limit("steps per pass", high=1, measure=steps_per_pass)
    assert repr(custom) == (
        "Limit('steps per pass', high=1, measure="
        "test_limit_reads_like_the_call_that_made_it.<locals>.steps_per_pass)"
    )


def test_limit_result_names_value_limit_and_trace(finished):
    _, trace = finished
    result = evaluate(trace, Limit("final_accuracy", low=0.99, units="fraction"))
    assert isinstance(result, LimitResult)
    text = repr(result)
    short(text, trace.path)
    assert text == (
        f"<LimitResult FAIL: final_accuracy = {trace.final_accuracy:.6g} fraction, limit "
        f"x >= 0.99 fraction (trace {trace.path}, run 0000)>"
    )


def test_target_before_and_after_hello():
    target = session.direct_target()
    assert repr(target) == (
        "<DeviceClient emulator (in-process): hilbench-twin, "
        f"firmware {target.info.firmware!r}, protocol {target.info.protocol_version}>"
    )
    target.info = None
    assert repr(target) == "<DeviceClient emulator (in-process): no HELLO answered yet>"


def test_trace_of_a_hand_built_run_still_prints(finished):
    """A repr must never raise: a Trace with no evaluations and no steps prints too."""
    _, trace = finished
    empty = Trace(
        path=trace.path,
        run_id="0001",
        attrs={"status": "running", "model": "mlp", "dataset": "digits", "backend": "board"},
        config={},
        steps=trace.steps[:0],
        samples=trace.samples[:0],
        evals=trace.evals[:0],
        timing=trace.timing[:0],
        events=trace.events[:0],
    )
    text = repr(empty)
    assert re.fullmatch(
        rf"<Trace run 0001 of {re.escape(str(trace.path))}: running, mlp on digits, board, "
        r"0 steps, 0 forward passes, not evaluated>",
        text,
    )
