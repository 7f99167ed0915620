"""A run whose trace may not fit the disk is said before it starts (issue 26, item 14)."""

from __future__ import annotations

import shutil
from pathlib import Path

from hilbench.trace import schema as S
from hilbench.trace.run_setup import bytes_per_forward_pass, free_space_problem


def test_the_bound_per_forward_pass_is_the_q1_step() -> None:
    step = S.DATASETS["steps"].itemsize + S.DATASETS["samples"].itemsize
    assert bytes_per_forward_pass() == (step + 2 * S.DATASETS["timing"].itemsize) / 2


def test_a_budget_beyond_the_free_space_is_said_in_one_line(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    fits = int(free / bytes_per_forward_pass() / 2)
    assert free_space_problem(tmp_path / "t.h5", fits) is None
    line = free_space_problem(tmp_path / "new" / "dir" / "t.h5", int(fits * 4))
    assert line is not None and "\n" not in line
    assert "free" in line and any(unit in line for unit in ("MiB", "GiB", "TiB"))
