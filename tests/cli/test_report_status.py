"""``hilbench report`` says what became of a run: a killed writer, a failed run's error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cli_helpers import ROOT, hilbench

WRITE = """
import os, signal, sys
from hilbench.trace import TraceWriter
attrs = dict(protocol_version=1, backend="emulate", device_id="d", firmware="f", model="m",
             model_hash="h", dataset="x", seed=1)
w = TraceWriter.create(sys.argv[1], attrs, {"budget": 80}, flush_interval_s=None)
for k in range(5):
    w.append_step(k, 1, [k], [1], [-1], [0.5], [1], 1e-3, 1, k, 1.0, 2 * (k + 1), 10)
w.flush()
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
with w:
    raise RuntimeError("the board fell off the bench")
"""


def _write(path: Path, how: str) -> None:
    subprocess.run([sys.executable, "-c", WRITE, str(path), how], cwd=ROOT, capture_output=True)


def test_report_says_the_writer_of_a_killed_run_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "killed.h5"
    _write(path, "kill")
    table = hilbench("report", str(path))
    assert table.returncode == 0, table.stderr
    assert "writer is gone" in table.stdout and "--resume" in table.stdout
    data = json.loads(hilbench("report", str(path), "--json").stdout)
    assert (data["status"], data["writer"], data["steps"]) == ("running", "gone", 5)


def test_report_shows_a_failed_runs_error_text(tmp_path: Path) -> None:
    path = tmp_path / "failed.h5"
    _write(path, "fail")
    table = hilbench("report", str(path), "--run", "0000")
    assert table.returncode == 0, table.stderr
    assert "the board fell off the bench" in table.stdout
    data = json.loads(hilbench("report", str(path), "--json").stdout)
    assert data["status"] == "failed"
    assert "RuntimeError: the board fell off the bench" in data["error"]
