"""The file a command writes with ``-o``: never one of its inputs, never an existing file
unless ``--force``, and written whole or not at all (a temporary file renamed over it)."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from hilbench.errors import ConfigError


def add_force(p: argparse.ArgumentParser) -> None:
    """The ``--force`` option: replace an existing output file."""
    p.add_argument(
        "--force", action="store_true", help="replace the -o file if it exists (never an input)"
    )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def check_output(out: Path, inputs: Iterable[Path | None], *, force: bool, example: str) -> None:
    """Refuse ``out`` before any work: a directory, one of the command's ``inputs``, or an
    existing file without ``force``. ``example`` is a file name to suggest."""
    if out.is_dir():
        raise ConfigError(f"{out} is a directory", f"give a file name, e.g. -o {example}")
    for src in inputs:
        if src is not None and _same_file(out, Path(src)):
            raise ConfigError(
                f"-o {out} is also an input of this command; writing it would destroy {src}",
                f"write elsewhere, e.g. -o {example}",
            )
    if out.exists() and not force:
        raise ConfigError(
            f"{out} already exists", "pass --force to replace it, or choose another -o"
        )


def write_atomic(out: Path, data: bytes) -> None:
    """``data`` as the file ``out``: written to a temporary file next to it, synced, then
    renamed over it, so ``out`` is either the old file or the whole new one."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise ConfigError(
            f"cannot write {out}: {exc.strerror or exc}",
            "choose a writable location with free space",
        ) from None
