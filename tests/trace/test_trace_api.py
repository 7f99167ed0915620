"""The reader API: final values, values at a number of forward passes, timing per source,
updates for replay and resume, the optional DataFrame, following a live run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from trace_helpers import CONFIG, RUN_ATTRS

from hilbench.errors import TraceError
from hilbench.trace import Follower, Trace, TraceWriter


def _run(path: Path, *, finish: bool = True) -> TraceWriter:
    w = TraceWriter.create(path, RUN_ATTRS, CONFIG)
    w.append_eval(0, 0, 0.1, 2.3)
    for k in range(100):
        q = 2 if k < 50 else 4
        w.append_step(
            k,
            q,
            [k] * q,
            [1] * q,
            [2] * q,
            [0.0] * q,
            [k % 5] * q,
            1.0,
            2,
            k,
            2.0 - k / 100,
            (4 * k + 4) if k < 50 else 200 + 8 * (k - 49),
            1,
        )
        if k in (24, 74):
            w.append_eval(k, 100 if k == 24 else 400, 0.5 if k == 24 else 0.8, 1.0)
        w.append_timing(k, "PROBE", 0.001 * (k + 1), "modeled")
        w.append_timing(k, "PROBE", 0.002, "host")
    w.append_timing(99, "APPLY", 0.0005, "device")
    if finish:
        w.append_eval(99, 600, 0.9, 0.4)
        w.finish("complete", weights_crc=1234)
        w.close()
    return w


def test_final_values(tmp_path: Path) -> None:
    _run(tmp_path / "r.h5")
    f = Trace.open(tmp_path / "r.h5").final
    assert (f.status, f.finished, f.accuracy, f.loss) == ("complete", True, 0.9, 0.4)
    assert (f.forward_passes, f.steps, f.q, f.weights_crc) == (600, 100, 4, 1234)
    assert f.train_loss == pytest.approx(sum(2.0 - k / 100 for k in range(50, 100)) / 50)


def test_values_at_a_number_of_forward_passes(tmp_path: Path) -> None:
    _run(tmp_path / "r.h5")
    tr = Trace.open(tmp_path / "r.h5")
    s = tr.at(150)  # steps are at 4, 8, ..., 200, then 208, ...; evals at 0, 100, 400, 600
    assert (s.requested, s.forward_passes, s.step, s.q) == (150, 148, 36, 2)
    assert (s.accuracy, s.eval_forward_passes) == (0.5, 100)
    assert s.loss == pytest.approx(2.0 - 36 / 100)
    assert tr.at(200).step == 49 and tr.at(207).step == 49 and tr.at(208).q == 4
    early = tr.at(3)
    assert (early.step, early.forward_passes, early.accuracy) == (None, 0, 0.1)
    assert tr.accuracy_at(399) == 0.5 and tr.accuracy_at(400) == 0.8
    assert tr.accuracy_at(10_000) == 0.9 and tr.accuracy_at(-1) is None


def test_timing_percentiles_per_command_and_source(tmp_path: Path) -> None:
    _run(tmp_path / "r.h5")
    tp = Trace.open(tmp_path / "r.h5").timing_percentiles((50, 99, 99.9))
    assert list(tp) == [("PROBE", "modeled"), ("PROBE", "host"), ("APPLY", "device")]
    modeled = tp[("PROBE", "modeled")]
    assert modeled["count"] == 100 and modeled["min"] == 0.001 and modeled["max"] == 0.1
    assert modeled["p50"] == pytest.approx(0.0505) and "p99.9" in modeled
    assert tp[("PROBE", "host")]["p99"] == pytest.approx(0.002)


def test_updates_and_resume_state_of_an_unfinished_run(tmp_path: Path) -> None:
    w = _run(tmp_path / "r.h5", finish=False)
    w.flush()
    try:
        tr = Trace.open(tmp_path / "r.h5")
        rs = tr.resume_state()
        assert (rs.run_id, rs.status, rs.resumable) == ("0000", "running", True)
        assert (rs.steps, rs.next_step, rs.forward_passes) == (100, 100, 600)
        assert rs.last_eval_forward_passes == 400
        ups = list(tr.updates())
        assert len(ups) == 100
        step, seeds, coeffs = ups[60]
        assert step == 60 and seeds.dtype.name == "uint32" and seeds.tolist() == [60] * 4
        assert coeffs.dtype.name == "int32" and coeffs.tolist() == [0] * 4
    finally:
        w.close("complete")
    assert not Trace.open(tmp_path / "r.h5").resume_state().resumable


def test_the_core_does_not_need_pandas(tmp_path: Path) -> None:
    code = (
        "import sys; import hilbench.trace, hilbench.trace.limits, hilbench.trace.replay; "
        "print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
    _run(tmp_path / "r.h5")
    tr = Trace.open(tmp_path / "r.h5")
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(TraceError, match="needs pandas"):
            tr.to_dataframe()
    else:
        df = tr.to_dataframe("timing")
        assert list(df.columns) == ["step", "command", "duration_s", "source"]
        assert len(df) == 201
    with pytest.raises(TraceError, match="no table 'nope'"):
        tr.to_dataframe("nope")


def test_follower_sees_only_new_rows(tmp_path: Path) -> None:
    path = tmp_path / "live.h5"
    w = TraceWriter.create(path, RUN_ATTRS, CONFIG, flush_interval_s=None)
    try:
        fol = Follower(path)
        first = fol.poll()
        assert (first.run_id, first.total_steps, first.status) == ("0000", 0, "running")
        for k in range(5):
            w.append_step(k, 1, [k], [1], [2], [0.0], [1], 1.0, 2, k, 1.0, 2 * k + 2, 1)
        w.append_eval(4, 10, 0.25, 1.0)
        w.flush()
        up = fol.poll()
        assert up.steps["step"].tolist() == [0, 1, 2, 3, 4] and up.evals["accuracy"].tolist() == [
            0.25
        ]
        w.append_step(5, 1, [5], [1], [2], [0.0], [1], 1.0, 2, 5, 1.0, 12, 1)
        w.event("retry", "PROBE seq 9")
        w.flush()
        up = fol.poll()
        assert up.steps["step"].tolist() == [5] and up.total_steps == 6
        assert up.events["kind"].tolist() == ["retry"] and not up.finished
    finally:
        w.close("complete")
    last = fol.poll()  # the gzip'd file that replaced the original
    assert (last.finished, last.status, len(last.steps), last.total_steps) == (
        True,
        "complete",
        0,
        6,
    )
