"""device_fw/core/gen/hb_wire.h: the wire protocol (docs/protocol.md) for the C core.

Declared in hilbench.protocol (frames.py, messages.py); this module only renders it.
"""

from __future__ import annotations

from hilbench.cgen import Header, builder, c_ident
from hilbench.protocol import frames
from hilbench.protocol import messages as m


@builder("hb_wire.h")
def build() -> Header:
    h = Header("hb_wire.h", "hilbench/protocol (frames.py, messages.py)")
    h.comment("Framing (docs/protocol.md, Framing)")
    h.define("HB_PROTOCOL_VERSION", frames.PROTOCOL_VERSION)
    h.define("HB_MAX_PAYLOAD", frames.MAX_PAYLOAD)
    h.define("HB_HEADER_SIZE", frames.HEADER_SIZE)
    h.define("HB_CRC_SIZE", frames.CRC_SIZE)
    h.define("HB_FRAME_OVERHEAD", frames.FRAME_OVERHEAD)
    h.define("HB_MAX_ENCODED_LEN", frames.MAX_ENCODED_LEN)
    h.define("HB_MIN_DEVICE_PAYLOAD", m.MIN_DEVICE_PAYLOAD)
    h.define("HB_RESPONSE_BIT", m.RESPONSE_BIT)
    h.comment("Message types")
    for t in m.MessageType:
        h.define(f"HB_TYPE_{t.name}", int(t))
    h.comment("Error codes")
    for code in m.ErrorCode:
        h.define(f"HB_ERR_{code.name}", int(code))
    h.comment("HELLO capability bits")
    for name in sorted(n for n in m.__all__ if n.startswith("CAP_")):
        h.define(f"HB_{name}", getattr(m, name))
    h.comment("Timing sources")
    for src in m.TimingSource:
        h.define(f"HB_TIMING_{c_ident(src.name)}", int(src))
    h.comment("Message-level limits")
    for name in ("N_SLOTS", "MAX_BATCH", "MAX_EPS", "MAX_Q", "MAX_STRING", "MAX_ERROR_MSG"):
        h.define(f"HB_{name}", getattr(m, name))
    return h
