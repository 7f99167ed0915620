"""Tests of the C firmware built for this host (SIL): built once per session with make."""

from __future__ import annotations

from pathlib import Path

import pytest

from hilbench.launch.sil import sil_binary


@pytest.fixture(scope="session")
def sil_path() -> Path:
    """device_fw/build/host/hilbench-sil, built (or found up to date) by make."""
    return sil_binary()
