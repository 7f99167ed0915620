"""Serve a device twin over a byte stream: a pty in-process, or TCP for `hilbench emulate`."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

from hilbench.device.device import DeviceTwin
from hilbench.link.stream import ByteStream, SocketStream
from hilbench.protocol.frames import FrameDecoder

POLL_S = 0.05


class FrameEndpoint:
    """The device's side of a byte link: bytes in, answer bytes out (frames and BAD_FRAMEs).

    Its receive buffer is the device's: ``max_payload`` + overhead encoded bytes; a longer run
    or a frame whose payload exceeds ``max_payload`` is answered BAD_FRAME ``oversize``."""

    def __init__(self, twin: DeviceTwin) -> None:
        self.twin = twin
        self.frames = 0  # frames answered (damaged ones included)
        self._problems: list[str] = []
        self._decoder = FrameDecoder(
            on_error=lambda problem: self._problems.append(problem.kind),
            max_payload=twin.max_payload,  # longer frames are "oversize", as on the device
        )

    def feed(self, data: bytes) -> bytes:
        """Answers to the frames (and damaged frames) ``data`` completes, in stream order."""
        out = []
        start, end = 0, len(data)
        while start < end:  # one delimiter at a time: each ends at most one frame or problem
            i = data.find(b"\x00", start)
            stop = end if i < 0 else i + 1
            frames = self._decoder.feed(data[start:stop] if start or stop < end else data)
            if self._problems:
                out += [self.twin.bad_frame(kind) for kind in self._problems]
                self._problems.clear()
            out += [self.twin.handle(frame) for frame in frames]
            self.frames += len(frames)
            start = stop
        return b"".join(out)


def serve_stream(
    twin: DeviceTwin,
    stream: ByteStream,
    stop: threading.Event,
    endpoint: FrameEndpoint | None = None,
) -> int:
    """Answer every frame on ``stream`` until ``stop`` is set or the stream closes; returns
    the number of frames answered (also ``endpoint.frames`` if the caller gave one)."""
    endpoint = endpoint or FrameEndpoint(twin)
    while not stop.is_set():
        try:
            data = stream.read(POLL_S)
        except EOFError:
            break
        answer = endpoint.feed(data) if data else b""
        if answer:
            stream.write(answer)
    return endpoint.frames


class ThreadedServer:
    """Runs ``serve_stream`` in a daemon thread; ``close()`` stops and joins it."""

    def __init__(self, twin: DeviceTwin, stream: ByteStream) -> None:
        self.twin = twin
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=serve_stream, args=(twin, stream, self._stop), name="hilbench-twin", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


def serve_tcp(
    host: str,
    port: int,
    twin: DeviceTwin,
    *,
    on_listening: Callable[[str, int], None] | None = None,
    stop: threading.Event | None = None,
    log: Callable[[str], None] | None = None,
) -> None:
    """Serve one host connection at a time on ``host:port``; the twin outlives connections.
    ``log`` hears one line when a host connects and one when it goes (frames answered,
    duration, and why it ended)."""
    stop = stop or threading.Event()
    say = log or (lambda line: None)
    with socket.create_server((host, port), reuse_port=False) as server:
        server.settimeout(POLL_S * 4)
        if on_listening:
            on_listening(*server.getsockname()[:2])
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except TimeoutError:
                continue
            who = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
            say(f"connection from {who}")
            started = time.monotonic()
            stream = SocketStream(conn)
            endpoint = FrameEndpoint(twin)
            why = "the host closed it"
            try:
                serve_stream(twin, stream, stop, endpoint)
                if stop.is_set():
                    why = "the server stopped"
            except OSError as exc:  # the host went away mid-write: wait for the next one
                why = f"the link failed ({exc.strerror or exc})"
            finally:
                stream.close()
            say(
                f"{who} disconnected after {time.monotonic() - started:.1f} s and "
                f"{endpoint.frames:,} frames ({why})"
            )
