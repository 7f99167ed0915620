"""Running pytest as a user does, in a real terminal, and reading what the screen shows.

pytest runs on a pty (pexpect) of a given size; pyte plays the bytes it writes into a screen
model with scrollback, so a test sees the screen the user would see after the run, including
whatever a live panel drew and erased on the way. ``tmux_screen`` does the same in tmux, a
terminal emulator of its own, as a cross-check of the screen model.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pyte

#: Bytes only the live panel writes: its title (``hilbench · mlp on ...``).
PANEL_MARK = "hilbench · ".encode()

#: Three tests as a new user writes them: one passes, one fails on accuracy, one is plain.
SAMPLE = """
def test_learns(zo_session):
    out = zo_session(budget=200, scheduler="fixed:2")
    assert out.result.forward_passes == 200

def test_reaches_99(zo_session):
    out = zo_session(budget=200, scheduler="fixed:2")
    assert out.result.final_accuracy > 0.99

def test_plain():
    assert 1 + 1 == 2
"""

#: Environment settings that would override the terminal's size or pytest's colours.
_UNSET = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "PY_COLORS", "PYTEST_ADDOPTS", "CI")


def project(directory: Path, source: str = SAMPLE, name: str = "test_sample.py") -> Path:
    """A directory with its own pytest.ini (so no outer configuration applies) and one file."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pytest.ini").write_text("[pytest]\n")
    (directory / name).write_text(source)
    return directory


def terminal_env() -> dict[str, str]:
    """The environment of the pytest in the terminal: this run's settings that would change
    its screen left out, and nothing saying it is an xdist worker (when the suite runs with
    -n, an inherited PYTEST_XDIST_WORKER makes plugins such as pytest-benchmark warn)."""
    env = {
        k: v for k, v in os.environ.items() if k not in _UNSET and not k.startswith("PYTEST_XDIST")
    }
    env["TERM"] = "xterm-256color"
    return env


@dataclass
class Screen:
    """What a pytest run in a terminal left: every line (scrollback first), and its bytes."""

    lines: list[str]
    raw: bytes
    status: int

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def panel_drawn(self) -> bool:
        return PANEL_MARK in self.raw

    def joined(self) -> str:
        """The text with wrapped lines put back together (for paths longer than a line)."""
        return "".join(self.lines)


def _row(line: dict, columns: int) -> str:
    return "".join(line[x].data for x in range(columns)).rstrip()


def run_in_terminal(
    cwd: Path, *args: str, columns: int = 100, rows: int = 50, timeout: float = 300
) -> Screen:
    """``python -m pytest ARGS`` on a pty of ``columns`` x ``rows``; the screen it leaves."""
    screen = pyte.HistoryScreen(columns, rows, history=100_000)
    stream = pyte.ByteStream(screen)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "pytest", *args],
        cwd=str(cwd),
        env=terminal_env(),
        dimensions=(rows, columns),
        timeout=timeout,
    )
    raw = bytearray()
    deadline = time.monotonic() + timeout
    while True:
        try:
            data = child.read_nonblocking(65536, timeout=max(1.0, deadline - time.monotonic()))
        except pexpect.EOF:
            break
        raw += data
        stream.feed(data)
    child.close()
    lines = [_row(line, columns) for line in screen.history.top]
    lines += [_row(screen.buffer[y], columns) for y in range(rows)]
    while lines and not lines[-1]:
        lines.pop()
    status = child.exitstatus if child.exitstatus is not None else -(child.signalstatus or 0)
    return Screen(lines, bytes(raw), status)


def tmux_screen(
    cwd: Path, *args: str, columns: int = 100, rows: int = 40, timeout: float = 300
) -> tuple[list[str], bytes]:
    """``python -m pytest ARGS`` in a detached tmux window: every line it shows (scrollback
    first) and the bytes pytest wrote. The tmux server is this call's own (its own socket)
    and is stopped at the end."""
    tmux = shutil.which("tmux")
    assert tmux, "tmux is not installed"
    socket = f"hilbench-test-{uuid.uuid4().hex[:8]}"
    go, done, raw = (cwd / f".{socket}.{name}" for name in ("go", "done", "raw"))
    pytest_argv = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "pytest", *args))
    command = (
        f"while [ ! -e {go} ]; do sleep 0.05; done; {pytest_argv}; touch {done}; sleep {timeout}"
    )
    base = [tmux, "-L", socket, "-f", "/dev/null"]
    env = terminal_env()
    env.pop("TMUX", None)
    size = ["-x", str(columns), "-y", str(rows)]
    try:
        subprocess.run(
            [*base, "new-session", "-d", *size, "-c", str(cwd), command], check=True, env=env
        )
        # the pane's output, byte for byte, from before pytest starts
        subprocess.run([*base, "pipe-pane", "-o", f"cat > {raw}"], check=True)
        go.touch()
        deadline = time.monotonic() + timeout
        while not done.exists():
            assert time.monotonic() < deadline, f"pytest in tmux did not finish in {timeout} s"
            time.sleep(0.2)
        out = subprocess.run(
            [*base, "capture-pane", "-p", "-S", "-", "-E", "-"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        subprocess.run([*base, "kill-server"], check=False, capture_output=True)
    lines = [line.rstrip() for line in out.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines, raw.read_bytes() if raw.exists() else b""


def normalized(lines: list[str]) -> list[str]:
    """Lines with what differs between two identical runs blanked: timings, retry counts."""
    out = []
    for line in lines:
        line = re.sub(r" in \d+\.\d+s( \(\d+:\d\d:\d\d\))?", " in Ns", line)
        line = re.sub(r"^=+ (.* in Ns) =+$", r"= \1 =", line)  # centred: width follows time
        line = re.sub(r" in Ns =+$", " in Ns =", line)  # ... also where a narrow screen wrapped it
        line = re.sub(r"^=+ (\d+ (passed|failed))", r"= \1", line)
        line = re.sub(r"^events    .*", "events    ...", line)
        out.append(line)
    return out
