"""A firmware image running as a child process (the SIL program, later QEMU): started, watched
and always stopped.

The child announces where to reach it on its first stdout line (a pty path, or
``listening HOST:PORT``); everything else it prints is kept (the last lines) for the error
message when it dies. ``stop()`` terminates it, then kills it; a finalizer does the same if the
owner forgets, and the SIL asks the kernel to end it when its parent dies, so an interrupted
test run leaves nothing behind.
"""

from __future__ import annotations

import collections
import contextlib
import subprocess
import threading
import time
import weakref
from pathlib import Path

from hilbench.errors import LinkError

READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 2.0
TAIL_LINES = 20


class FirmwareProcess:
    """One child process and the first line it prints."""

    def __init__(self, argv: list[str], *, name: str) -> None:
        self.argv = [str(a) for a in argv]
        self.name = name
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    def start(self, timeout: float = READY_TIMEOUT_S) -> str:
        """Start the child; return its first stdout line (where to connect)."""
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # Ctrl-C in the terminal goes to us; we stop the child
            )
        except OSError as exc:
            raise LinkError(
                f"cannot start {self.name} ({self.argv[0]}): {exc.strerror or exc}",
                "build it with `make -C device_fw host`, or name the binary with --fw PATH",
            ) from None
        self._finalizer = weakref.finalize(self, _kill, self._proc)
        threading.Thread(target=self._drain, args=(self._proc.stderr,), daemon=True).start()
        line = self._first_line(timeout)
        threading.Thread(target=self._drain, args=(self._proc.stdout,), daemon=True).start()
        return line

    def _first_line(self, timeout: float) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        result: list[bytes] = []
        reader = threading.Thread(
            target=lambda: result.append(self._proc.stdout.readline()), daemon=True
        )
        reader.start()
        reader.join(timeout)
        line = result[0].decode(errors="replace").strip() if result else ""
        if not line:
            self.stop()
            raise LinkError(
                f"{self.name} did not start: {self.failure()}",
                "run the command by hand to see why, or rebuild it (`make -C device_fw host`)",
            )
        return line

    def _drain(self, stream) -> None:
        for raw in iter(stream.readline, b""):
            self._tail.append(raw.decode(errors="replace").rstrip())

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def failure(self) -> str:
        """What is known about a child that stopped: exit code and its last lines."""
        code = self.returncode
        status = "still running" if code is None else f"exit code {code}"
        time.sleep(0.05)  # let the drain threads collect the last lines
        tail = " | ".join(line for line in self._tail if line) or "no output"
        return f"{status}; last output: {tail}"

    def stop(self) -> None:
        if self._proc is not None:
            _kill(self._proc)
        if self._finalizer is not None:
            self._finalizer.detach()


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(STOP_TIMEOUT_S)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def repo_dir() -> Path | None:
    """The source checkout hilbench runs from (holding device_fw/), or None if installed."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "device_fw" / "Makefile").exists() else None
