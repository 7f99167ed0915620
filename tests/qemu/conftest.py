"""Tests of the firmware on a Cortex-M55 under qemu-system-arm -M mps3-an547 (issue 12).

Nothing here is skipped for a missing tool: CI installs gcc-arm-none-eabi and qemu-system-arm,
and a missing one fails with the apt command that installs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hilbench.launch.qemu import firmware_elf


@pytest.fixture(scope="session")
def an547_elf() -> Path:
    """device_fw/build/an547/hilbench-an547.elf, built (or found up to date) by make."""
    return firmware_elf()
