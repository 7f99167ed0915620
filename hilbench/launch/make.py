"""``make -C device_fw TARGET``, one build at a time per checkout.

Every place that builds firmware (``--sil``, ``--qemu``, a board's ``--fw``, the benchmarks,
the tests) goes through :func:`run_make`: parallel sessions and pytest-xdist workers share
``device_fw/build`` and must not compile the same object twice at once. make itself decides
what changed.
"""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

BUILD_TIMEOUT_S = 600


def run_make(root: Path, *args: str, timeout_s: float = BUILD_TIMEOUT_S) -> tuple[int, str]:
    """``make -s -C ROOT/device_fw ARGS`` under the checkout's build lock: (status, output)."""
    lock_path = root / "device_fw" / "build" / ".lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            done = subprocess.run(
                ["make", "-s", "-C", str(root / "device_fw"), *args],
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return done.returncode, done.stdout + done.stderr


def output_tail(output: str, lines: int = 6) -> str:
    """The last lines of a failed build, on one line (for a one-line error)."""
    return " | ".join(output.strip().splitlines()[-lines:])
