"""Serve a device twin over a byte stream: a pty in-process, or TCP for `hilbench emulate`."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

from hilbench.device.device import FRAME_START, DeviceTwin
from hilbench.link.stream import ByteStream, SocketStream
from hilbench.protocol import messages as m
from hilbench.protocol import spec
from hilbench.protocol.frames import FrameDecoder, encode_frame

POLL_S = 0.05
#: The start of the ERROR text a busy ``hilbench emulate --listen`` answers a second host
#: with (the client names the fix when it sees it: hilbench/client/device_client.py).
BUSY = "busy:"
BUSY_LINGER_S = 10.0  # how long a refused host is answered before its connection is closed
#: How long a newcomer waits for the host before it to be seen gone: a host that closed its
#: socket just before the next one connected is noticed within a poll (POLL_S) of its thread.
HANDOVER_S = 10 * POLL_S


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
    serving: dict[str, object] = {"thread": None, "who": "", "since": ""}
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
            current = serving["thread"]
            if isinstance(current, threading.Thread) and _still_serving(current):
                # a second host: answered at once that the twin is taken, never left silent
                say(f"refused {who}: serving {serving['who']}")
                message = (
                    f"{BUSY} this hilbench emulate --listen serves {serving['who']} (since "
                    f"{serving['since']}); one host at a time"
                )
                threading.Thread(
                    target=refuse_busy, args=(conn, message, stop), daemon=True
                ).start()
                continue
            say(f"connection from {who}")
            serving.update(who=who, since=time.strftime("%H:%M:%S"))
            serving["thread"] = thread = threading.Thread(
                target=_serve_connection, args=(twin, conn, who, stop, say), daemon=True
            )
            thread.start()
        current = serving["thread"]
        if isinstance(current, threading.Thread):
            current.join(timeout=2.0)


def _still_serving(thread: threading.Thread) -> bool:
    """Whether the host before still holds the twin: it may have closed just now."""
    thread.join(timeout=HANDOVER_S)
    return thread.is_alive()


def _serve_connection(
    twin: DeviceTwin,
    conn: socket.socket,
    who: str,
    stop: threading.Event,
    say: Callable[[str], None],
) -> None:
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


def busy_answer(frame_type: int, seq: int, message: str) -> bytes:
    """The ERROR frame a busy server answers a request with (BAD_ARGUMENT, ``message``)."""
    text = spec.format_message("%s", (message,))  # at most 256 bytes
    payload = m.ErrorResponse(code=spec.ErrorCode.BAD_ARGUMENT, request_type=frame_type,
                              message=text)  # fmt: skip
    return FRAME_START + encode_frame(spec.MessageType.ERROR, seq, payload.pack())


def refuse_busy(
    conn: socket.socket, message: str, stop: threading.Event, linger_s: float = BUSY_LINGER_S
) -> None:
    """Answer every frame of a host that came while another is served with ERROR ``message``
    for ``linger_s`` seconds, then close its connection."""
    stream = SocketStream(conn)
    decoder = FrameDecoder()
    deadline = time.monotonic() + linger_s
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            data = stream.read(POLL_S)
            answers = [busy_answer(f.type, f.seq, message) for f in decoder.feed(data)]
            if answers:
                stream.write(b"".join(answers))
    except (EOFError, OSError):
        pass
    finally:
        stream.close()
