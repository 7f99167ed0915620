"""The contract between the host and the an547 firmware (device_fw/port/an547) beyond the wire.

The firmware runs under ``qemu-system-arm -M mps3-an547`` and reads its settings from the
semihosting command line (``-semihosting-config arg=...``); it reports its boot and a hard
fault on the semihosting console (QEMU's stderr) and ends QEMU through semihosting's
``SYS_EXIT_EXTENDED`` with one of the exit codes below. Declared here once and rendered into
``device_fw/core/gen/hb_an547.h`` by ``python -m hilbench.cgen`` (hilbench/cgen/an547_h.py).
"""

from __future__ import annotations

import re

from hilbench.launch.cortex_m import FAULT_REPORT

#: The firmware's options (semihosting arguments after argv[0]), each ``--name=value`` or, for
#: a flag, ``--name``. Values are escaped with :func:`escape_arg`.
OPTIONS: dict[str, str] = {
    "BOOT_NONCE": "--boot-nonce",  # N: the first boot's nonce is N, N + k after the k-th RESET
    "NONCE_SEED": "--nonce-seed",  # R: nonces derived from R and the boot count (the default)
    "ARENA_BYTES": "--arena-bytes",  # the device's arena, a multiple of 16, <= MAX_ARENA_BYTES
    "MAX_PAYLOAD": "--max-payload",  # what HELLO announces (MIN_DEVICE_PAYLOAD..MAX_PAYLOAD)
    "DEVICE_ID": "--device-id",  # HELLO's device_id (<= MAX_STRING bytes)
    "FIRMWARE": "--firmware",  # HELLO's firmware string (<= MAX_STRING bytes)
    "ICOUNT": "--icount",  # flag: QEMU runs with -icount shift=0, ticks count instructions
    "CRASH_AFTER": "--crash-after",  # N: a deliberate bus fault once N frames were handled
}

#: Semihosting exit codes of the firmware (QEMU exits with them).
EXIT_OK = 0
EXIT_BAD_OPTION = 2  # an option it cannot take: the console line says which and why
EXIT_FAULT = 3  # a HardFault (or an escalated fault): the fault report was sent first

#: The arena lives in ISRAM0 + ISRAM1 (4 MiB at 0x21000000): its largest size.
MAX_ARENA_BYTES = 4 * 1024 * 1024

#: Console lines (hb_format templates: %d %x %s and zero-padded widths only).
MESSAGES: dict[str, str] = {
    # once per boot, when the UART is ready: the boot count since QEMU started (0, 1, ...)
    "BOOT": "hilbench-an547: boot %d, arena %d bytes, max_payload %d, timing %s",
    # the Cortex-M fault report: sent on the UART and written to the console, then QEMU exits
    # with EXIT_FAULT
    "FAULT": FAULT_REPORT,
    # a refused option: the option, then the cause and fix; QEMU exits with EXIT_BAD_OPTION
    "BAD_OPTION": "hilbench-an547: %s: %s",
}

#: Timing names in the BOOT line, per TIMING_SOURCE the firmware uses.
TIMING_NAMES = {"none": "none", "instructions": "instructions"}

_ESCAPES = {"%": "%25", " ": "%20", ",": "%2C"}


def escape_arg(value: str) -> str:
    """A value as one semihosting argument: QEMU joins the arguments with spaces and splits
    ``-semihosting-config`` at commas, so '%', ' ' and ',' travel as %25, %20 and %2C (the
    firmware decodes any %XX)."""
    return "".join(_ESCAPES.get(ch, ch) for ch in value)


def template_regex(template: str) -> re.Pattern[str]:
    """A regex matching what ``template`` formats to, one group per conversion."""
    parts = re.split(r"(%0?\d*[dxs])", template)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(re.escape(part))
        elif part.endswith("x"):
            out.append("([0-9a-f]+)")
        elif part.endswith("d"):
            out.append("(-?[0-9]+)")
        else:
            out.append(r"(\S+)")
    return re.compile("".join(out))


_BOOT_RE = template_regex(MESSAGES["BOOT"])
_FAULT_RE = template_regex(MESSAGES["FAULT"])


def parse_boot(line: str) -> tuple[int, int, int, str] | None:
    """(boot count, arena bytes, max_payload, timing) of a BOOT line, or None."""
    match = _BOOT_RE.search(line)
    if match is None:
        return None
    boot, arena, payload, timing = match.groups()
    return int(boot), int(arena), int(payload), timing


def find_fault(text: str) -> str | None:
    """The last fault report in ``text`` (console output or decoded UART frames), or None."""
    found = None
    for match in _FAULT_RE.finditer(text):
        found = match.group(0)
    return found
