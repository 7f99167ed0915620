"""device_fw/core/gen/hb_an547.h: the an547 port's side contract with the host.

Declared in hilbench/launch/an547.py: the firmware's semihosting options, its exit codes, the
largest arena, and the console and fault-report templates. Only device_fw/port/an547 includes
this header; the core never does.
"""

from __future__ import annotations

from hilbench.cgen import Header, builder
from hilbench.launch import an547


@builder("hb_an547.h")
def build() -> Header:
    h = Header("hb_an547.h", "hilbench/launch/an547.py")
    h.comment("Options on the semihosting command line: --name=value (a flag: --name)")
    for name, flag in an547.OPTIONS.items():
        h.string(f"HB_AN547_OPT_{name}", flag)
    h.comment("Semihosting exit codes")
    for name in ("EXIT_OK", "EXIT_BAD_OPTION", "EXIT_FAULT"):
        h.define(f"HB_AN547_{name}", getattr(an547, name))
    h.define("HB_AN547_MAX_ARENA_BYTES", an547.MAX_ARENA_BYTES, "ISRAM0 + ISRAM1")
    h.comment("Console and fault-report templates (hb_format: %d %x %s, zero-padded widths)")
    for name, text in an547.MESSAGES.items():
        h.string(f"HB_AN547_MSG_{name}", text)
    h.comment("Timing names of the BOOT line")
    for name, text in an547.TIMING_NAMES.items():
        h.string(f"HB_AN547_TIMING_{name.upper()}", text)
    return h
