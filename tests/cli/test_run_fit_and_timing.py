"""``hilbench run``'s summary and ``hilbench report`` state where the run's model fits on the
STM32N6 and which model the modeled device time comes from (issue 27), end to end."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import hilbench


@pytest.mark.parametrize(("option", "name"), [(None, "m55@600MHz"), ("npu", "npu@800MHz")])
def test_summary_and_report_name_the_fit_and_the_timing_model(tmp_path, option, name):
    trace = tmp_path / "t.h5"
    extra = ["--timing-model", option] if option else []
    r = hilbench(
        "run", "--budget", "160", "--seed", "3", "--no-live", "--trace", str(trace), *extra
    )
    assert r.returncode == 0, r.stderr
    assert f"(modeled: {name})" in r.stdout
    assert "fits on-chip SRAM" in r.stdout and "STM32N6 memory" in r.stdout
    d = json.loads(hilbench("report", str(trace), "--json").stdout)
    assert d["timing_model"] == name
    assert d["n6_memory"].startswith("ZO step (") and "fits on-chip SRAM" in d["n6_memory"]
    human = hilbench("report", str(trace)).stdout
    assert name in human and "n6_memory" in human
