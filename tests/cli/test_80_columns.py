"""Issue 26 item 14: on an 80-column terminal (a CI log) tables fit, names tell runs apart
and no number loses a digit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hilbench.cli.compare import distinguishing_names

ROOT = Path(__file__).resolve().parents[2]


def hilbench(cwd: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80", "OPENBLAS_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "hilbench", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> tuple[Path, list[str]]:
    where = tmp_path_factory.mktemp("traces")
    first = "20261201-192001-mlp-digits-seed0.h5"
    hilbench(where, "run", "--budget", "400", "--no-live", "--trace", first)
    names = [first, "20261201-192001-mlp-digits-seed1.h5", "20261201-192001-mlp-digits-seed2.h5"]
    for name in names[1:]:
        shutil.copy(where / first, where / name)
    return where, names


def test_the_report_tables_fit_80_columns_with_whole_names_and_numbers(traces):
    where, names = traces
    out = hilbench(where, "report", names[0])
    widths = [len(line) for line in out.splitlines()]
    assert max(widths) <= 80, max(widths)
    timing = out[out.index("command timing") :]
    for command in ("APPLY_PROBE ", "APPLY_PROBED ", "WEIGHTS_CRC "):
        assert command in timing
    assert "…" not in timing  # no name or number cut short
    assert re.search(r"host ms\s+│\s+\d+ │", timing)


def test_compare_headers_tell_the_runs_apart(traces):
    where, names = traces
    out = hilbench(where, "compare", *names)
    assert max(len(line) for line in out.splitlines()) <= 80
    header = "\n".join(out.splitlines()[:4])
    for seed in ("…seed0", "…seed1", "…seed2"):
        assert seed in header, header
    assert "trace names: 20261201-192001-mlp-digits-….h5" in out.replace("\n", " ")


def test_distinguishing_names_keep_numbers_whole():
    assert distinguishing_names(["20261201-192001.h5", "20261201-192312.h5"]) == (
        ["…192001", "…192312"],
        "20261201-….h5",
    )
    assert distinguishing_names(["a.h5", "b.h5"]) == (["a.h5", "b.h5"], "")
    assert distinguishing_names(["run.h5", "run.h5"]) == (["run.h5", "run.h5"], "")
    assert distinguishing_names(["run-seed1.h5", "run-seed12.h5"])[0] == ["…seed1", "…seed12"]
