"""Options that would be ignored or are malformed are refused with one line before any work
(issue 26, item 6); --resume takes a new budget, an explicit --emulate, a socket:// board."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import ROOT, emulator_on_tcp, hilbench


def _one_line(proc, *words: str) -> None:
    assert proc.returncode == 2, (proc.stdout[-500:], proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    for w in words:
        assert w in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "--fw", "garbage.elf"], ["--fw", "emulate", "ignored"]),
        (["run", "--emulate", "--fw", "garbage.elf"], ["--fw", "emulate"]),
        (["infer", "m.tflite", "-i", "X.npy", "--fw", "garbage.elf"], ["--fw", "emulator"]),
        (["run", "--link-faults", ""], ["--link-faults is blank"]),
        (["run", "--link-faults", "drop=0.1,drop=0.2"], ["drop more than once"]),
        (["run", "--resume", "x.h5", "--seed", "3"], ["--seed with --resume"]),
        (["run", "--resume", "x.h5", "--trace", "y.h5"], ["--trace with --resume"]),
    ],
    ids=["run-fw", "emulate-fw", "infer-fw", "blank-faults", "dup-faults", "seed", "trace"],
)
def test_an_option_that_would_be_ignored_is_refused(tmp_path: Path, args, words) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hilbench", *args], capture_output=True, text=True, cwd=tmp_path
    )
    _one_line(proc, *words)


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run SIGTERMed early: status interrupted, 400 steps or more on disk."""
    from tests.session.test_resume import steps_on_disk

    path = tmp_path_factory.mktemp("cut") / "cut.h5"
    argv = [sys.executable, "-m", "hilbench", "run", "--budget", "40000", "--no-live"]
    proc = subprocess.Popen([*argv, "--trace", str(path)], cwd=ROOT)
    import time

    deadline = time.monotonic() + 120
    while steps_on_disk(path) < 50 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    proc.terminate()
    proc.wait(timeout=60)
    return path


def test_resume_takes_a_new_budget_on_an_explicit_emulator(cut: Path, tmp_path: Path) -> None:
    path = tmp_path / "more.h5"
    path.write_bytes(cut.read_bytes())
    from hilbench.trace import Trace

    spent = Trace.open(path).forward_passes
    less = hilbench("run", "--resume", str(path), "--budget", str(spent - 8), "--no-live")
    _one_line(less, "already spent")
    budget = spent + 800  # not the 40,000 the run started with
    proc = hilbench("run", "--resume", str(path), "--emulate", "--budget", str(budget), "--no-live")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(hilbench("report", str(path), "--json").stdout)
    assert data["status"] == "complete" and data["forward_passes"] == budget
    assert data["backend"] == "emulate"


def test_resume_on_a_socket_board_gets_its_port(cut: Path, tmp_path: Path) -> None:
    path = tmp_path / "board.h5"
    path.write_bytes(cut.read_bytes())
    with emulator_on_tcp() as url:
        proc = hilbench("run", "--resume", str(path), "--board", url, "--no-live", timeout=300)
    assert "needs a port" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert json.loads(hilbench("report", str(path), "--json").stdout)["status"] == "complete"
