"""The process-wide SIGTERM handler live writers share: SIGTERM raises ``Terminated``."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by the SIGTERM handler a live TraceWriter installs.

    A KeyboardInterrupt, so everything that handles Ctrl-C (the writer's ``with`` block, the
    CLI) handles ``kill PID`` the same way: buffered rows are flushed and the run is closed
    with status "interrupted".
    """


_lock = threading.Lock()
_users = 0
_previous: Any = None


def on_sigterm(signum: int, frame: object) -> None:
    """The handler: raise Terminated once; a second SIGTERM gets the previous behaviour."""
    with contextlib.suppress(ValueError, TypeError):
        signal.signal(signal.SIGTERM, _previous or signal.SIG_DFL)
    raise Terminated("SIGTERM")


def acquire() -> bool:
    """Install the handler (main thread, default handler only); True if this user counts."""
    global _users, _previous
    if threading.current_thread() is not threading.main_thread():
        return False
    with _lock:
        current = signal.getsignal(signal.SIGTERM)
        if _users == 0:
            if current not in (signal.SIG_DFL, None):
                return False  # the application has its own handler: leave it alone
            _previous = current
            signal.signal(signal.SIGTERM, on_sigterm)
        _users += 1
        return True


def release() -> None:
    """One user fewer; the last one puts the previous handler back."""
    global _users
    with _lock:
        _users -= 1
        if _users == 0 and threading.current_thread() is threading.main_thread():
            with contextlib.suppress(ValueError, TypeError):
                if signal.getsignal(signal.SIGTERM) is on_sigterm:
                    signal.signal(signal.SIGTERM, _previous or signal.SIG_DFL)
