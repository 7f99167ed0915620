"""Waiting for a held board, visibly: a countdown on the terminal, lines in a log.

On a terminal the line is redrawn in place (``\\r``) every half second; elsewhere (CI logs,
pytest's captured output, an xdist worker) a line is written when the wait starts, when the
holder changes and every ``LOG_EVERY_S`` seconds, so a log says who was waited for and how long.
"""

from __future__ import annotations

import datetime as dt
import getpass
import itertools
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import TextIO

LOG_EVERY_S = 10.0
IDENTITY_TAG = "-hb"  # a hilbench client's labgrid user: USER-hbPID[-N]

Status = Callable[[str], None]
_counter = itertools.count()


def client_name(environ: dict[str, str] | None = None) -> str:
    """This process's labgrid client name, ``HOST/USER-hbPID[-N]``: labgrid's HOST/USER (its
    LG_HOSTNAME / LG_USERNAME are honoured) with the process id, so ``labgrid-client who`` names
    the process holding a place and a dead one's places can be released (hilbench.farm.guard).
    N counts further clients of the same process."""
    env = os.environ if environ is None else environ
    host = env.get("LG_HOSTNAME") or socket.gethostname()
    user = env.get("LG_USERNAME") or _user()
    n = next(_counter)
    return f"{host}/{user}{IDENTITY_TAG}{os.getpid()}" + (f"-{n}" if n else "")


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid{os.getuid()}"


def parse_client_name(name: str) -> tuple[str, str, int | None]:
    """(host, user, pid) of a labgrid client name; pid is None unless hilbench made the name."""
    host, _, user = name.partition("/")
    base, tag, rest = user.rpartition(IDENTITY_TAG)
    pid_text = rest.split("-", 1)[0]
    if tag and base and pid_text.isdigit():
        return host, user, int(pid_text)
    return host, user, None


def since(timestamp: float, now: float | None = None) -> str:
    """'since 08:24:50, 3 min ago' for a Unix time."""
    now = time.time() if now is None else now
    ago = max(0.0, now - timestamp)
    if ago < 90:
        span = f"{ago:.0f} s ago"
    elif ago < 5400:
        span = f"{ago / 60:.0f} min ago"
    else:
        span = f"{ago / 3600:.1f} h ago"
    clock = dt.datetime.fromtimestamp(timestamp).strftime("%H:%M:%S")
    return f"since {clock}, {span}"


class Countdown:
    """Shows 'waiting for X: <who holds it>; N s left' as it changes (see the module doc)."""

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if live is None:
            isatty = getattr(self.stream, "isatty", None)
            live = bool(isatty and isatty())
        self.live = live
        self._last_text = ""
        self._last_line = -1e9
        self._drawn = False

    def __call__(self, text: str) -> None:
        now = time.monotonic()
        if self.live:
            self.stream.write("\r\x1b[K" + text)
            self._drawn = True
        else:
            holder = text.rsplit(";", 1)[0]
            if holder != self._last_text or now - self._last_line >= LOG_EVERY_S:
                self.stream.write(text + "\n")
                self._last_text, self._last_line = holder, now
        self.stream.flush()

    def clear(self) -> None:
        if self.live and self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False
