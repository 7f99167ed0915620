"""Fixtures for the trace tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from trace_helpers import write_known_run


@pytest.fixture
def known_trace(tmp_path: Path) -> Path:
    """A finished one-run trace holding trace_helpers.STEPS, evals, timing, an event, a blob."""
    path = tmp_path / "known.h5"
    write_known_run(path, model_blob=b"\x00model\xff" * 3)
    return path
