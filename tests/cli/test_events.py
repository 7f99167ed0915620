"""What a run's trace says happened: event names and counts, the step they carry, and
evaluations (issue 14). In-process runs on the in-memory link: seconds, not minutes."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hilbench import session
from hilbench.backend.emulate import EmulatorBackend
from hilbench.config import RunConfig
from hilbench.console import NullView
from hilbench.link.faults import FaultSpec
from hilbench.trace import Trace
from hilbench.trace.schema import EVENT_MEANINGS

ROOT = Path(__file__).resolve().parents[2]


def memory(faults: str = "") -> EmulatorBackend:
    return EmulatorBackend(link="memory", faults=FaultSpec.parse(faults) if faults else None)


def config(path: Path, **kw) -> RunConfig:
    return RunConfig(trace=path, live=False, **{"budget": 400, "scheduler": "fixed:2", **kw})


class StopAfter(NullView):
    """Ctrl-C after ``n`` steps, as from the keyboard."""

    def __init__(self, n: int) -> None:
        self.n = n

    def update(self, progress) -> None:
        if progress.step >= self.n:
            raise KeyboardInterrupt


def test_each_injected_reset_is_one_reset_and_recoveries_follow(tmp_path):
    path = tmp_path / "resets.h5"
    result = session.run(config(path, budget=1600), backend=memory("reset=0.01,seed=5"))
    trace = Trace.open(path)
    counts = Counter(trace.events["kind"].tolist())
    kinds, details = trace.events["kind"].tolist(), trace.events["detail"].tolist()
    injected = [i for i, (k, d) in enumerate(zip(kinds, details, strict=True)) if k == "injected"]
    resets = [i for i, k in enumerate(kinds) if k == "reset"]
    assert len(injected) >= 3 and all(details[i].startswith("reset:") for i in injected)
    # one event per reboot (it was two: the NO_SESSION answer and the new boot nonce), each
    # after the injected reset that caused it; a reset injected just before the recovery's
    # HELLO reboots a device that already lost its session: noticed as the same reboot
    assert 1 <= len(resets) <= len(injected)
    for n, i in enumerate(resets):
        assert sum(j < i for j in injected) >= n + 1
    # a recovery per run of resets (a reset during a recovery restarts it), at their step
    steps = trace.events["step"]
    assert counts["recovered"] == len({int(steps[i]) for i in resets})
    assert "fault" not in counts  # the old name, for two different things
    assert result.events == dict(counts)


def test_a_resumed_run_logs_restored_at_the_step_it_continues_from(tmp_path):
    path = tmp_path / "cut.h5"
    with pytest.raises(KeyboardInterrupt):
        session.run(config(path, budget=800), backend=memory(), view=StopAfter(30))
    cut = Trace.open(path)
    assert cut.status == "interrupted" and cut.n_steps >= 30
    session.resume(path, backend=memory())
    trace = Trace.open(path)
    events = {str(e["kind"]): int(e["step"]) for e in trace.events}
    assert events["restored"] == cut.n_steps  # not 0: the step the run continues from
    assert "recovered" not in events and "reset" not in events  # no reset happened
    assert trace.status == "complete" and trace.n_steps == 800 // 4


def test_the_exception_that_ends_a_run_is_an_error_event(tmp_path):
    path = tmp_path / "died.h5"

    class Dies(NullView):
        def update(self, progress) -> None:
            if progress.step >= 5:
                raise RuntimeError("board unplugged")

    with pytest.raises(RuntimeError):
        session.run(config(path), backend=memory("drop=0.02,seed=2"), view=Dies())
    trace = Trace.open(path)
    assert trace.status == "failed"
    assert trace.events["kind"].tolist()[-1] == "error"
    assert trace.events["detail"].tolist()[-1] == "RuntimeError: board unplugged"
    assert "fault" not in trace.event_counts()


def test_every_event_kind_the_code_records_is_documented():
    """The kinds the code passes to event() / append_event() are EVENT_MEANINGS' keys, and
    docs/trace-format.md's table lists the same kinds."""
    emitted = set()
    pattern = re.compile(
        r"""(?:\.event|append_event|_forward_event)\(\s*(?:[^,()]*,\s*)?"([a-z_]+)\""""
    )
    for path in (ROOT / "hilbench").rglob("*.py"):
        emitted |= set(pattern.findall(path.read_text()))
    emitted |= {"interrupt", "error", "restored", "recovered"}  # chosen by an expression
    assert emitted <= set(EVENT_MEANINGS), emitted - set(EVENT_MEANINGS)
    doc = (ROOT / "docs" / "trace-format.md").read_text()
    table = set(re.findall(r"^\| `([a-z_]+)` \| ", doc.split("### `events`")[1], re.M))
    assert set(EVENT_MEANINGS) <= table, set(EVENT_MEANINGS) - table


@pytest.mark.parametrize(("budget", "evals"), [(800, [0, 400, 800]), (900, [0, 400, 800, 900])])
def test_the_final_weights_are_evaluated_once(tmp_path, budget, evals):
    path = tmp_path / "evals.h5"
    result = session.run(config(path, budget=budget, eval_every=400), backend=memory())
    trace = Trace.open(path)
    assert trace.evals["forward_passes"].tolist() == evals  # not [..., 800, 800]
    eval_requests = trace.timing[
        (trace.timing["command"] == "EVAL") & (trace.timing["source"] == "host")
    ]
    assert len(eval_requests) == len(evals)  # the device evaluated each once
    assert result.final_accuracy == trace.evals["accuracy"][-1]


def test_a_resume_does_not_evaluate_the_weights_it_evaluated_before(tmp_path):
    """Cut right after the evaluation at 400 passes, the resumed run does not repeat it."""
    path, whole = tmp_path / "cut.h5", tmp_path / "whole.h5"
    session.run(config(whole, budget=400, eval_every=400), backend=memory())
    with pytest.raises(KeyboardInterrupt):  # step 100 = 400 passes: after its evaluation
        session.run(config(path, budget=400, eval_every=400), backend=memory(), view=StopAfter(100))
    assert Trace.open(path).evals["forward_passes"].tolist() == [0, 400]
    session.resume(path, backend=memory())
    a, b = Trace.open(whole), Trace.open(path)
    assert b.evals["forward_passes"].tolist() == [0, 400]
    assert (b.weights_crc, b.final_accuracy) == (a.weights_crc, a.final_accuracy)
    np.testing.assert_array_equal(a.evals["accuracy"], b.evals["accuracy"])
