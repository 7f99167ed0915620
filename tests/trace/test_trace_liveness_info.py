"""What the reader says of a run after its writer died or failed (report, --json, resume)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from trace_helpers import CONFIG, RUN_ATTRS

from hilbench.trace import Trace, TraceWriter, run_infos

KILLED = """
import os, sys, time
sys.path.insert(0, sys.argv[2])
from trace_helpers import CONFIG, RUN_ATTRS
from hilbench.trace import TraceWriter
w = TraceWriter.create(sys.argv[1], RUN_ATTRS, CONFIG, flush_interval_s=None)
w.append_step(0, 1, [5], [1], [2], [0.5], [1], 1e-3, 1, 0, 1.0, 2, 4)
w.flush()
print("flushed", flush=True)
time.sleep(60)
"""


def test_a_killed_writer_is_known_gone_a_live_one_alive(tmp_path: Path) -> None:
    path = tmp_path / "k.h5"
    here = str(Path(__file__).parent)
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(path), here], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "flushed"
        live = Trace.open(path)
        assert (live.status, live.writer_alive) == ("running", True)
        assert live.summary()["writer"] == "alive"
        assert run_infos(path)[0].writer_alive is True
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    dead = Trace.open(path)
    assert (dead.status, dead.finished, dead.writer_alive) == ("running", False, False)
    assert dead.summary()["writer"] == "gone" and dead.n_steps == 1
    assert run_infos(path)[0].writer_alive is False


def test_a_failed_run_says_its_error(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    with pytest.raises(RuntimeError), TraceWriter.create(path, RUN_ATTRS, CONFIG) as w:
        w.append_step(0, 1, [5], [1], [2], [0.5], [1], 1e-3, 1, 0, 1.0, 2, 4)
        raise RuntimeError("the board fell off the bus")
    tr = Trace.open(path)
    assert tr.status == "failed" and tr.error == "RuntimeError: the board fell off the bus"
    summary = tr.summary()
    assert summary["error"] == tr.error and summary["writer"] is None  # finished: no writer
    assert run_infos(path)[0].writer_alive is None


def test_a_complete_run_has_no_error(known_trace: Path) -> None:
    assert Trace.open(known_trace).summary()["error"] is None
