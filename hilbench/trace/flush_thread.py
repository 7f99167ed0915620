"""A daemon thread that calls a flush function every few seconds until stopped."""

from __future__ import annotations

import threading
from collections.abc import Callable


class PeriodicFlush:
    """Calls ``flush()`` every ``interval_s`` seconds in a daemon thread until ``stop()``."""

    def __init__(self, flush: Callable[[], None], interval_s: float, name: str) -> None:
        self._flush = flush
        self._interval = float(interval_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._flush()

    def stop(self, timeout_s: float = 30) -> None:
        """Stop the thread and wait for a flush in progress (not from the thread itself)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout_s)
