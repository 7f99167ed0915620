"""The twin's device log: the ring of lines the firmware keeps (device_fw/core/log.c), the same
lines, the same bounds, the same LOG frames at the same moments (docs/protocol.md, "Device
log"): queued as they happen, sent just before the next answer of an open session."""

from __future__ import annotations

from hilbench.protocol import messages as m
from hilbench.protocol import spec
from hilbench.protocol.frames import encode_frame

FRAME_START = b"\x00"


class LogRing:
    """At most ``spec.LOG_RING`` lines; a full ring drops its oldest line and the next frame
    sent says how many it dropped."""

    __slots__ = ("dropped", "lines", "sent")

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []
        self.dropped = 0
        self.sent = 0  # LOG frames sent since the twin was made (a statistic)

    def clear(self) -> None:
        self.lines.clear()
        self.dropped = 0

    def add(self, kind: int, text: str) -> None:
        if len(self.lines) == spec.LOG_RING:
            del self.lines[0]
            self.dropped += 1
        self.lines.append((int(kind), m.cut_text(text, spec.MAX_LOG_MSG)))

    def banner(self, device_id: str, firmware: str, reason: str) -> None:
        self.add(spec.LogKind.BOOT, spec.LOG_TEXTS["BANNER"] % (device_id, firmware, reason))

    def flush(self) -> bytes:
        """The wire bytes of every waiting line, oldest first (b"" when none wait)."""
        if not self.lines:
            return b""
        out = []
        for kind, text in self.lines:
            frame = m.LogFrame(kind, min(self.dropped, 0xFFFF), text)
            out.append(FRAME_START + encode_frame(spec.MessageType.LOG, 0, frame.pack()))
            self.dropped = 0
        self.sent += len(self.lines)
        self.lines.clear()
        return b"".join(out)
