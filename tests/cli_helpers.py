"""Running the ``hilbench`` command in a subprocess, as a user would."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from hilbench.config import RunConfig, parse_scheduler

ROOT = Path(__file__).resolve().parents[1]
#: ``hilbench run``'s default schedule, and its q (each step spends 2q forward passes)
DEFAULT_SCHEDULER = RunConfig().scheduler
DEFAULT_Q = int(parse_scheduler(DEFAULT_SCHEDULER)[1]["q"])


def default_steps(budget: int) -> int:
    """The steps a default run of ``budget`` forward passes takes."""
    return budget // (2 * DEFAULT_Q)


def hilbench(
    *args: str, timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hilbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or ROOT,
    )


def ctrl_c_reaches_the_child() -> None:
    """``preexec_fn`` of a child a test sends Ctrl-C (SIGINT) to: SIGINT's default action.

    A process started in the background by a non-interactive shell (a CI job, ``cmd &``)
    inherits SIGINT ignored, and so would the child (Python keeps an ignored SIGINT
    ignored): it would never see the test's Ctrl-C. Set it explicitly instead."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def emulator_on_tcp():
    """``hilbench emulate --listen 127.0.0.1:0`` in a separate process; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "hilbench", "emulate", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline and "socket://" not in line:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise RuntimeError(f"emulator exited: {proc.stderr.read()}")
        url = line.strip().rsplit(" ", 1)[-1]
        assert url.startswith("socket://"), line
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
