"""resume_point: what a resumed run continues from, through the trace package's public API."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from trace_helpers import STEPS, write_known_run

from hilbench.errors import TraceError
from hilbench.trace import LoggedUpdate, Trace, resume_point
from hilbench.trace.row_buffer import SAMPLE_FIELDS, STEP_FIELDS
from hilbench.trace.schema import SAMPLES_DTYPE, STEPS_DTYPE


def _unfinished(path: Path) -> Path:
    w = write_known_run(path, finish=False, model_blob=b"blob")
    w.flush()
    w.close("interrupted")
    return path


def test_resume_point_gives_every_logged_step_by_name(tmp_path: Path) -> None:
    point = resume_point(_unfinished(tmp_path / "r.h5"))
    assert point.run_id == "0000" and point.status == "interrupted"
    assert point.model_blob == b"blob" and point.config["lr"] == 0.001
    assert [u.step for u in point.updates] == [s["step"] for s in STEPS]
    assert point.next_step == 3
    for u, s in zip(point.updates, STEPS, strict=True):
        assert isinstance(u, LoggedUpdate)
        assert u.seeds.dtype == np.uint32 and u.coeffs.dtype == np.int32
        assert u.seeds.tolist() == s["seeds"] and u.coeffs.tolist() == s["coeffs"]
        assert u.grads.tolist() == s["grads"]
        assert (u.q, u.batch_seed, u.loss, u.forward_passes, u.lr, u.eps) == (
            s["q"],
            s["batch_seed"],
            s["loss"],
            s["forward_passes"],
            s["lr"],
            s["eps"],
        )
    # the same updates the reader gives replay
    trace = Trace.open(tmp_path / "r.h5")
    for u, (step, seeds, coeffs) in zip(point.updates, trace.updates(), strict=True):
        assert u.step == step and (u.seeds == seeds).all() and (u.coeffs == coeffs).all()
    assert point.last_eval == (12, 0.625, 1.3)


def test_resume_point_refuses_a_complete_run(known_trace: Path) -> None:
    with pytest.raises(TraceError, match="nothing to resume"):
        resume_point(known_trace)
    with pytest.raises(TraceError, match="is complete: there is nothing to resume"):
        resume_point(known_trace, "0000")


def test_buffered_columns_are_the_schemas_by_name() -> None:
    assert {*STEP_FIELDS, "sample_start"} == set(STEPS_DTYPE.names)
    assert {*SAMPLE_FIELDS, "step"} == set(SAMPLES_DTYPE.names)
