"""What this hilbench is: its release and, run from a git checkout, the commit it was run from.

Kept free of heavy imports: ``hilbench --version`` and every trace's ``git_revision``
attribute read it.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from hilbench import __version__

#: The checkout hilbench runs from, if it runs from one: the directory above the package.
_ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(_ROOT), *args],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@functools.cache
def git_revision() -> str:
    """The commit hilbench runs from, 40 hex digits, with ``-dirty`` when tracked files differ
    from it; "" when hilbench does not run from its own git checkout (an installed copy, or a
    copy inside some other repository)."""
    top = _git("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() != _ROOT:
        return ""
    head = _git("rev-parse", "HEAD")
    if not head:
        return ""
    changed = _git("status", "--porcelain", "--untracked-files=no")
    return head + ("-dirty" if changed else "")


def version_line() -> str:
    """``hilbench 0.1.0 (git 1a2b3c4d5e6f, modified; protocol 1, trace format 2)``."""
    from hilbench.protocol.frames import PROTOCOL_VERSION
    from hilbench.trace.schema import FORMAT_VERSION

    rev = git_revision()
    where = ""
    if rev:
        commit, dirty = rev.removesuffix("-dirty"), rev.endswith("-dirty")
        where = f"git {commit[:12]}{', modified' if dirty else ''}; "
    return (
        f"hilbench {__version__} ({where}protocol {PROTOCOL_VERSION}, "
        f"trace format {FORMAT_VERSION})"
    )
