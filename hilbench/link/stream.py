"""The device side of a link: a minimal byte stream over a file descriptor or a socket."""

from __future__ import annotations

import contextlib
import os
import select
import socket
from typing import Protocol


class ByteStream(Protocol):
    """What the device server needs: read with a timeout, write all, close."""

    def read(self, timeout: float) -> bytes: ...  # b"" on timeout; raises EOFError when closed
    def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...


class FdStream:
    """A byte stream over a file descriptor (the master side of a pty)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self, timeout: float) -> bytes:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return b""
        try:
            data = os.read(self.fd, 65536)
        except OSError as exc:  # EIO: the other side of the pty closed
            raise EOFError(str(exc)) from None
        if not data:
            raise EOFError("closed")
        return data

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class SocketStream:
    """A byte stream over a connected TCP socket (no Nagle delay)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def read(self, timeout: float) -> bytes:
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return b""
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("peer closed the connection")
        return data

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()
