"""Invariant 4: a run killed with SIGKILL resumes in the same file and ends bit-identical."""

import json
import signal
import subprocess
import sys
import time

import pytest

from hilbench.errors import TraceError
from hilbench.trace import Trace
from hilbench.trace.replay import replay
from tests.cli_helpers import ROOT, hilbench

ARGS = ["--budget", "40000", "--seed", "7", "--scheduler", "fixed:4", "--no-live"]


def steps_on_disk(path) -> int:
    try:
        return Trace.open(path).n_steps
    except (TraceError, OSError):
        return 0


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGKILL, "running"), (signal.SIGTERM, "interrupted")]
)
def test_a_killed_run_resumes_and_ends_like_an_uninterrupted_one(tmp_path, signum, status):
    whole, cut = tmp_path / "whole.h5", tmp_path / "cut.h5"
    assert hilbench("run", *ARGS, "--trace", str(whole)).returncode == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "hilbench", "run", *ARGS, "--trace", str(cut)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while steps_on_disk(cut) < 400 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signum)
    proc.wait(timeout=60)
    killed = Trace.open(cut)
    assert killed.status == status and 400 <= killed.n_steps < 5000

    resumed = hilbench("run", "--resume", str(cut))
    assert resumed.returncode == 0, resumed.stderr
    a = json.loads(hilbench("report", str(whole), "--json").stdout)
    b = json.loads(hilbench("report", str(cut), "--json").stdout)
    assert b["status"] == "complete" and b["steps"] == a["steps"] == 5000
    assert b["weights_crc"] == a["weights_crc"]
    assert b["final_accuracy"] == a["final_accuracy"]
    assert replay(Trace.open(cut)).matches


def test_resuming_a_finished_run_is_refused(tmp_path):
    path = tmp_path / "done.h5"
    assert hilbench("run", "--budget", "80", "--no-live", "--trace", str(path)).returncode == 0
    proc = hilbench("run", "--resume", str(path))
    assert proc.returncode == 2 and "nothing to resume" in proc.stderr
    assert "Traceback" not in proc.stderr
