"""``hilbench run --resume`` reads what it continues from through trace.resume_point alone, and
refuses a run it cannot continue with one line, leaving the trace as it was."""

from __future__ import annotations

from pathlib import Path

from hilbench.trace import Trace, TraceWriter
from tests.cli_helpers import hilbench

ATTRS = {
    "protocol_version": 1,
    "backend": "emulate",
    "device_id": "d",
    "firmware": "f",
    "model": "mlp",
    "model_hash": "h",
    "dataset": "digits",
    "seed": 1,
}


def _interrupted(path: Path, numbers: list[int], passes: list[int]) -> None:
    w = TraceWriter.create(path, ATTRS, {"budget": 400}, model_blob=b"blob", flush_interval_s=None)
    for k, fp in zip(numbers, passes, strict=True):
        w.append_step(k, 1, [k], [1], [-1], [0.5], [1], 1e-3, 1, k, 1.0, fp, 10)
    w.close("interrupted")


def _refused(path: Path, why: str) -> None:
    before = Trace.open(path).n_steps
    proc = hilbench("run", "--resume", str(path), "--no-live")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "damaged" in proc.stderr and why in proc.stderr, proc.stderr
    after = Trace.open(path)
    assert after.n_steps == before and after.status == "interrupted"  # nothing appended


def test_a_run_whose_step_numbers_skip_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gap.h5"
    _interrupted(path, [0, 1, 3], [8, 16, 24])
    _refused(path, "row 2 holds step 3")


def test_a_run_whose_forward_passes_go_back_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "back.h5"
    _interrupted(path, [0, 1, 2], [8, 16, 16])
    _refused(path, "step 2 has 16 forward passes")
