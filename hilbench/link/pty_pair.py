"""A pseudo-terminal pair: the device serves the master side, pyserial opens the slave path."""

from __future__ import annotations

import contextlib
import os
import tty

from hilbench.link.stream import FdStream


class PtyPair:
    """A raw pty; ``path`` is what the host opens with pyserial like any /dev/tty port."""

    def __init__(self) -> None:
        self.master_fd, self.slave_fd = os.openpty()
        tty.setraw(self.master_fd)
        tty.setraw(self.slave_fd)
        self.path = os.ttyname(self.slave_fd)

    def device_stream(self) -> FdStream:
        return FdStream(self.master_fd)

    def close(self) -> None:
        for fd in (self.slave_fd, self.master_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
