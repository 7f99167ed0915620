"""Issue 26 item 14: a run whose preparation (data, pre-training) takes more than 2 s says
what it is doing within those seconds, instead of leaving the screen blank."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from hilbench import session
from hilbench.config import RunConfig
from hilbench.console import PlainView

ROOT = Path(__file__).resolve().parents[2]


def test_a_vision_run_says_it_is_pre_training_before_the_title(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OPENBLAS_NUM_THREADS": "1",
        "HILBENCH_CACHE": str(tmp_path / "cache"),  # nothing cached: pre-training runs
        "COLUMNS": "400",  # the whole message on its first line (80 columns would wrap it)
    }
    cmd = [sys.executable, "-u", "-m", "hilbench", "run", "--model", "mobilenet_v2"]
    cmd += ["--width", "0.1", "--resolution", "16", "--budget", "100", "--no-live"]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        took = time.monotonic() - started
    finally:
        proc.kill()
        proc.wait()
    assert first.startswith("[hilbench] preparing mobilenet_v2 on "), first
    assert "pre-training the float model" in first and str(tmp_path / "cache") in first
    assert took < 15, took  # the pre-training itself takes ~25 s on 2 loaded cores


def test_a_quick_preparation_says_nothing_extra():
    lines: list[str] = []
    view = PlainView(write=lines.append)
    with session.said_if_slow(view, "preparing", after_s=2.0):
        time.sleep(0.1)
    time.sleep(0.1)
    assert lines == []
    with session.said_if_slow(view, "preparing x", after_s=0.05):
        time.sleep(0.3)
    assert lines == ["[hilbench] preparing x"]


def test_the_text_names_pre_training_only_when_there_is_some():
    assert "pre-training" not in session.preparing(RunConfig())
    assert "pre-training" in session.preparing(RunConfig(init="pretrained"))
