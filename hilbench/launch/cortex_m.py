"""What every Cortex-M55 port reports alike (device_fw/port/cortex_m/): one declaration."""

from __future__ import annotations

#: The fault report (the exception's number, 3 for HardFault, then the stacked registers and
#: the fault status registers), formatted by port/cortex_m/fault.c and sent as ERROR INTERNAL
#: ("internal error: " + this); each port says what happens next.
FAULT_REPORT = (
    "fault in exception %d: pc 0x%08x lr 0x%08x xpsr 0x%08x sp 0x%08x cfsr 0x%08x "
    "hfsr 0x%08x mmfar 0x%08x bfar 0x%08x sfsr 0x%08x"
)
