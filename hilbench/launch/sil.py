"""The firmware core built for Linux (software in the loop): find or build it, start it.

``make -C device_fw host`` builds ``device_fw/build/host/hilbench-sil`` (make decides whether
anything changed); builds are serialised with a lock file, so parallel test workers do not
race. The program serves the protocol on a pty it opens and prints the pty's path first.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hilbench.errors import HilbenchError, LinkError
from hilbench.launch.make import output_tail, run_make
from hilbench.launch.process import FirmwareProcess, repo_dir

SIL_RELATIVE = Path("device_fw/build/host/hilbench-sil")
BUILD_TIMEOUT_S = 300


def sil_binary(fw: str | os.PathLike | None = None) -> Path:
    """The SIL program: ``fw`` if given, else built from the checkout's device_fw/."""
    if fw is not None:
        path = Path(fw)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise HilbenchError(
                f"--fw {path}: no such executable",
                "name the SIL program (device_fw/build/host/hilbench-sil), or leave --fw out "
                "to build it",
            )
        return path
    root = repo_dir()
    if root is None:
        raise HilbenchError(
            "the SIL backend needs the device_fw sources, and this hilbench is installed "
            "without them",
            "run from a git checkout of hilbench, or pass --fw PATH to a built hilbench-sil",
        )
    build(root)
    return root / SIL_RELATIVE


def build(root: Path) -> None:
    """``make -C device_fw host``, one build at a time; a clear error if it fails."""
    if shutil.which("make") is None or (shutil.which("cc") is None and shutil.which("gcc") is None):
        raise HilbenchError(
            "building the SIL firmware needs make and a C compiler, and one is missing",
            "install them (Debian: apt install build-essential) or pass --fw PATH",
        )
    status, output = run_make(root, "host", timeout_s=BUILD_TIMEOUT_S)
    if status != 0:
        raise HilbenchError(
            f"building the SIL firmware failed (make -C device_fw host): {output_tail(output)}",
            "fix the compile error, or pass --fw PATH to a built hilbench-sil",
        )


class SilProcess(FirmwareProcess):
    """``hilbench-sil --pty`` with the given options; ``start()`` returns the pty path."""

    def __init__(self, binary: Path, *options: str) -> None:
        super().__init__([str(binary), "--pty", *options], name="the SIL firmware")

    def start(self, timeout: float = 10.0) -> str:
        path = super().start(timeout)
        if not path.startswith("/"):
            self.stop()
            raise LinkError(
                f"the SIL firmware printed {path!r} where its pty path belongs",
                "rebuild it (`make -C device_fw host`): it is not the program hilbench expects",
            )
        return path
