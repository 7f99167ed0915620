"""What a device's DEVICE_INFO answer says, as the trace and the console keep it.

``as_dict`` is the answer as plain ints with the caches and reset causes named (the trace's
``device_info_json`` run attribute, the selftest's report); ``summary`` is one line for HELLO's
status and the selftest. Bits are device_fw/port/port.h's.
"""

from __future__ import annotations

import json

from hilbench.protocol import messages as m

CACHE_BITS = {1: "I", 2: "D"}
RESET_BITS = {
    0x01: "power-on",
    0x02: "pin",
    0x04: "software",
    0x08: "watchdog",
    0x10: "lockup",
    0x20: "restart",
    0x40: "after a fault",
}
BRINGUP_BITS = {0x01: "VOS", 0x02: "PLL", 0x04: "clock switch", 0x08: "UART", 0x10: "IWDG"}
UART_COUNTERS = ("uart_overrun", "uart_framing", "uart_noise", "uart_dropped")


def _names(value: int, table: dict[int, str]) -> list[str]:
    return [name for bit, name in table.items() if value & bit]


def as_dict(info: m.DeviceInfoResponse) -> dict[str, object]:
    """The answer's fields (ints) and the names of its bit fields."""
    out: dict[str, object] = {
        name: int(getattr(info, name)) for name in type(info).__dataclass_fields__
    }
    out["cache_names"] = _names(info.caches, CACHE_BITS)
    out["reset_names"] = _names(info.reset_cause, RESET_BITS)
    out["bringup_error_names"] = _names(info.bringup_errors, BRINGUP_BITS)
    return out


def to_json(info: m.DeviceInfoResponse) -> str:
    return json.dumps(as_dict(info), sort_keys=True)


def summary(info: m.DeviceInfoResponse) -> str:
    """``600 MHz, caches I+D, arena 3,833,856 B, watchdog 2000 ms, UART 0/0/0/0 errors``."""
    clock = f"{info.cpu_hz / 1e6:g} MHz" if info.cpu_hz else "clock not reported"
    caches = "+".join(_names(info.caches, CACHE_BITS)) or "off"
    watchdog = f"watchdog {info.watchdog_ms} ms" if info.watchdog_ms else "no watchdog"
    uart = "/".join(str(getattr(info, c)) for c in UART_COUNTERS)
    parts = [clock, f"caches {caches}", f"arena {info.arena_bytes:,} B", watchdog]
    parts.append(f"UART errors {uart} (overrun/framing/noise/dropped)")
    if info.bringup_errors:
        parts.append("bring-up timed out: " + ", ".join(_names(info.bringup_errors, BRINGUP_BITS)))
    return ", ".join(parts)
