"""What the device says on its own, as the host keeps it (docs/protocol.md, "Device log").

Two things a lab reads when a test fails: the firmware's LOG lines (boot banner with the reset
reason, fault report, UART error counters), the last :data:`KEEP_LINES` of them, and the bytes
the port sent before its first frame (the first :data:`BEFORE_HELLO_BYTES`): a board
that prints something else (a bootloader, another firmware's console) is diagnosed by what it
printed.
"""

from __future__ import annotations

import time
from collections import deque

from hilbench.client.events import Channel, DeviceLine
from hilbench.protocol import messages as m

KEEP_LINES = 64  # LOG lines a client keeps (the trace keeps them all)
BEFORE_HELLO_BYTES = 4096  # bytes before the first HELLO answer a client keeps
SHOWN_BYTES = 256  # of them, in a "no answer" error


class DeviceLog:
    """A client's record of the device's own words."""

    __slots__ = ("_before", "_framed", "claimed", "lines", "malformed", "received")

    def __init__(self) -> None:
        self.lines: deque[DeviceLine] = deque(maxlen=KEEP_LINES)
        self._before = bytearray()
        self._framed = False  # a frame delimiter came: what follows is the protocol
        self.malformed = 0  # LOG frames whose payload did not read as the layout
        self.received = 0  # LOG lines received since the client was made
        self.claimed = 0  # of them, the first this many a trace has taken (claim())

    def claim(self) -> list[DeviceLine]:
        """The kept lines no trace has taken yet (received before a run subscribed, e.g. the
        boot banner of the HELLO a fixture sent), now taken; later lines are taken live."""
        fresh = min(self.received - self.claimed, len(self.lines))
        self.claimed = self.received
        return list(self.lines)[len(self.lines) - fresh :] if fresh else []

    @property
    def raw_before_hello(self) -> bytes:
        """The first bytes the port sent before its first frame (the HELLO answer's)."""
        return bytes(self._before)

    def before_frames(self, chunk: bytes) -> None:
        """Keep bytes received before the first frame (a device frame starts with 0x00: what
        comes before the first 0x00 is something else)."""
        if self._framed:
            return
        room = BEFORE_HELLO_BYTES - len(self._before)
        end = chunk.find(b"\x00")
        if end >= 0:
            self._framed = True
        if room > 0:
            self._before += chunk[: room if end < 0 else min(end, room)]

    def frame(self, frame: object, channel: Channel[DeviceLine]) -> DeviceLine | None:
        """Keep the line of a LOG frame and tell ``channel``'s subscribers; a malformed one
        is counted and skipped (the device's words never fail a command)."""
        try:
            log = m.decode_response(frame)
        except m.MessageError:
            self.malformed += 1
            return None
        line = DeviceLine(log.kind_name, log.message, log.dropped, time.time())
        self.lines.append(line)
        self.received += 1
        if channel.subscribers:
            channel.emit(line)
        return line

    def last(self, n: int = 10) -> list[DeviceLine]:
        return list(self.lines)[-n:]

    def said_before_hello(self) -> str:
        """The part of a "no answer" message that shows what the port sent before any frame."""
        if not self._before:
            return ""
        shown = bytes(self._before[:SHOWN_BYTES])
        more = len(self._before) - len(shown)
        tail = f" and {more} bytes more" if more else ""
        return f"; before any HELLO answer the port sent {describe_bytes(shown)}{tail}"


def console_detail(raw: bytes) -> str:
    """The trace's ``console`` event: the bytes before the first frame, as text when they read
    as text, else in hex (at most BEFORE_HELLO_BYTES of them)."""
    return f"{len(raw)} bytes before the first frame: {describe_bytes(raw)}"


def describe_bytes(data: bytes) -> str:
    """Bytes a port sent, for a message: as text when they read as text (a console, a
    bootloader), else in hex; ``nothing`` when there were none."""
    if not data:
        return "nothing"
    printable = sum(32 <= b < 127 or b in (9, 10, 13) for b in data)
    if printable >= 0.9 * len(data):
        text = data.decode("ascii", "replace")
        return f"text {text!r}"
    return data.hex(" ")
