"""Nothing lost: kill -9 after a flush, SWMR readers, automatic flushes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest
from trace_helpers import CONFIG, RUN_ATTRS

from hilbench.errors import TraceError
from hilbench.trace import Trace, TraceWriter, list_runs

# A writer in its own process: writes `n` steps, flushes, says so, writes more without
# flushing, then waits to be killed.
WRITER = """
import sys, time
from hilbench.trace import TraceWriter
path, n = sys.argv[1], int(sys.argv[2])
attrs = {k: v for k, v in (a.split("=", 1) for a in sys.argv[3:])}
w = TraceWriter.create(path, attrs, {"q": 3}, flush_rows=10**6, flush_interval_s=3600)
def step(k):
    w.append_step(k, 3, [k, k + 1, k + 2], [10 * k, 1, 2], [-k, 3, 4], [0.5 * k, 1.0, -1.0],
                  [k % 7, -1, 1], 1e-3, 2, 1000 + k, 0.001 * k, 6 * (k + 1), 3 * k)
for k in range(n):
    step(k)
w.append_eval(n - 1, 6 * n, 0.75, 0.5)
w.append_timing(n - 1, "PROBE", 0.004, "device")
w.append_event(n - 1, "note", "flushed")
w.flush()
print("flushed", flush=True)
for k in range(n, n + 50):
    step(k)
print("buffered", flush=True)
time.sleep(60)
"""

# A reader in its own process: prints the summary of the trace as JSON.
READER = """
import json, sys
from hilbench.trace import Trace
tr = Trace.open(sys.argv[1])
print(json.dumps({"steps": tr.n_steps, "samples": len(tr.samples),
                  "last_step": int(tr.steps["step"][-1]) if tr.n_steps else None,
                  "status": tr.status, "finished": tr.finished}))
"""

ATTR_ARGS = [f"{k}={v}" for k, v in RUN_ATTRS.items()]


def _read_in_subprocess(path: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", READER, str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_sigkill_after_flush_leaves_a_readable_file(tmp_path: Path) -> None:
    path = tmp_path / "killed.h5"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), "200", *ATTR_ARGS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "flushed"
        assert proc.stdout.readline().strip() == "buffered"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    tr = Trace.open(path)
    assert tr.n_steps == 200  # every flushed step; the 50 buffered ones died with the process
    assert tr.steps["step"].tolist() == list(range(200))
    assert tr.steps["sample_start"].tolist() == list(range(0, 600, 3))
    assert tr.steps["batch_seed"][-1] == 1199
    assert tr.steps["forward_passes"][-1] == 1200
    assert len(tr.samples) == 600
    assert tr.step_samples(123)["seed"].tolist() == [123, 124, 125]
    assert tr.step_samples(123)["loss_plus"].tolist() == [1230, 1, 2]
    assert tr.step_samples(123)["coeff"].tolist() == [123 % 7, -1, 1]
    assert tr.evals["accuracy"].tolist() == [0.75]
    assert tr.timing["source"].tolist() == ["device"]
    assert tr.events["detail"].tolist() == ["flushed"]
    assert (tr.finished, tr.status) == (False, "running")
    assert tr.final_accuracy == 0.75 and tr.forward_passes == 1200

    # the same file in another process too
    assert _read_in_subprocess(path) == {
        "steps": 200,
        "samples": 600,
        "last_step": 199,
        "status": "running",
        "finished": False,
    }


def _kill_writer_after(path: Path, n: int) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(n), *ATTR_ARGS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "flushed"
        assert proc.stdout.readline().strip() == "buffered"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def test_a_killed_run_can_be_resumed(tmp_path: Path) -> None:
    path = tmp_path / "resume.h5"
    _kill_writer_after(path, 40)
    with TraceWriter.resume(path) as w:
        assert w.run_id == "0000" and w.steps_written == 40
        for k in range(40, 45):
            w.append_step(k, 1, [k], [k], [-k], [0.0], [1], 1e-3, 2, k, 0.5, 6 * 40 + k, 0)
    tr = Trace.open(path)
    assert tr.steps["step"].tolist() == list(range(45))
    assert tr.steps["sample_start"].tolist() == [*range(0, 120, 3), *range(120, 125)]
    assert tr.samples["seed"][-5:].tolist() == [40, 41, 42, 43, 44]
    assert tr.events["kind"].tolist() == ["note", "resume"]
    assert tr.events["detail"][1] == "writer resumed with 40 steps on disk (run was running)"
    assert (tr.status, tr.finished, tr.forward_passes) == ("complete", True, 284)
    # the file is clean again: tools that do not use SWMR open it
    with h5py.File(path, "r") as f:
        assert f["runs/0000/steps"].shape == (45,)
    with pytest.raises(TraceError, match=r"run 0000 of .* is complete; there is nothing to resume"):
        TraceWriter.resume(path)


def test_a_new_run_can_follow_a_killed_one(tmp_path: Path) -> None:
    path = tmp_path / "after.h5"
    _kill_writer_after(path, 10)
    with TraceWriter.create(path, RUN_ATTRS, CONFIG) as w:
        w.append_step(0, 1, [7], [1], [2], [0.5], [1], 1e-3, 1, 0, 1.0, 2, 1)
    assert list_runs(path) == ["0000", "0001"]
    assert Trace.open(path, 0).n_steps == 10 and Trace.open(path, 0).status == "running"
    assert Trace.open(path).samples["seed"].tolist() == [7]


def test_a_live_writer_is_never_recovered_from(tmp_path: Path) -> None:
    path = tmp_path / "live.h5"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), "5", *ATTR_ARGS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "flushed"
        with pytest.raises(TraceError, match="another process"):
            TraceWriter.resume(path)
        with pytest.raises(TraceError, match="another process"):
            TraceWriter.create(path, RUN_ATTRS, CONFIG)
        assert Trace.open(path).n_steps == 5  # readers are welcome
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert Trace.open(path).n_steps == 5


def test_reader_follows_a_writer_in_swmr_mode(tmp_path: Path) -> None:
    path = tmp_path / "live.h5"
    w = TraceWriter.create(path, RUN_ATTRS, CONFIG, flush_rows=10**6, flush_interval_s=3600)
    try:
        for k in range(30):
            w.append_step(k, 1, [k], [k], [-k], [0.0], [0], 1e-3, 1, k, 1.0, 2 * (k + 1), k)
        assert _read_in_subprocess(path)["steps"] == 0  # nothing flushed yet
        w.flush()
        assert _read_in_subprocess(path) == {
            "steps": 30,
            "samples": 30,
            "last_step": 29,
            "status": "running",
            "finished": False,
        }
        for k in range(30, 45):
            w.append_step(
                k, 2, [k, k], [k, k], [-k, k], [0.0, 0.0], [0, 0], 1e-3, 1, k, 1.0, 4 * (k + 1), k
            )
        w.flush()
        assert _read_in_subprocess(path)["samples"] == 60
    finally:
        w.close("complete")
    assert _read_in_subprocess(path) == {
        "steps": 45,
        "samples": 60,
        "last_step": 44,
        "status": "complete",
        "finished": True,
    }


def test_automatic_flush_by_rows_and_by_time(tmp_path: Path) -> None:
    path = tmp_path / "auto.h5"
    with TraceWriter.create(path, RUN_ATTRS, CONFIG, flush_rows=10, flush_interval_s=0.3) as w:
        for k in range(25):
            w.append_step(k, 1, [k], [0], [0], [0.0], [0], 1e-3, 1, k, 1.0, k, k)
        assert (w.steps_written, w.pending) == (20, 5)  # 2 blocks of 10 went out at once
        # the background thread writes the rest within the interval, with no call needed
        deadline = time.monotonic() + 5
        while w.pending and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (w.steps_written, w.pending) == (25, 0)
        assert _read_in_subprocess(path)["steps"] == 25


def test_no_background_thread_when_the_interval_is_none(tmp_path: Path) -> None:
    path = tmp_path / "manual.h5"
    with TraceWriter.create(path, RUN_ATTRS, CONFIG, flush_interval_s=None) as w:
        w.append_step(0, 1, [1], [0], [0], [0.0], [0], 1e-3, 1, 0, 1.0, 2, 1)
        time.sleep(0.1)
        assert (w.steps_written, w.pending) == (0, 1)
    assert Trace.open(path).n_steps == 1  # written by close()


def test_an_interrupted_or_failed_run_can_be_resumed(tmp_path: Path) -> None:
    path = tmp_path / "ctrlc.h5"
    with pytest.raises(KeyboardInterrupt), TraceWriter.create(path, RUN_ATTRS, CONFIG) as w:
        for k in range(3):
            w.append_step(k, 1, [k], [1], [2], [0.0], [1], 1e-3, 1, k, 1.0, 2 * (k + 1), 1)
        raise KeyboardInterrupt
    tr = Trace.open(path)
    assert (tr.status, tr.finished) == ("interrupted", True)
    assert tr.resume_state().resumable and tr.resume_state().next_step == 3
    w = TraceWriter.resume(path)
    try:
        live = Trace.open(path)  # running again, final values back to their placeholders
        assert (live.status, live.finished, live.weights_crc) == ("running", False, None)
        assert (w.current_step, w.forward_passes) == (3, 6)
        w.append_step(3, 1, [3], [1], [2], [0.0], [1], 1e-3, 1, 3, 1.0, 8, 1)
        w.finish("complete", weights_crc=7)
    finally:
        w.close()
    tr = Trace.open(path)
    assert (tr.status, tr.n_steps, tr.forward_passes, tr.weights_crc) == ("complete", 4, 8, 7)
    assert tr.events["kind"].tolist() == ["interrupt", "resume"]
    assert tr.events["detail"][1] == "writer resumed with 3 steps on disk (run was interrupted)"
    assert not tr.resume_state().resumable
    with pytest.raises(TraceError, match="is complete; there is nothing to resume"):
        TraceWriter.resume(path)
