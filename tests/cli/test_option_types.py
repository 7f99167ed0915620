"""A wrong type is named as a wrong type, not as a range (issue 26, item 9); numbers typed
the way --help prints them (``30,000``) are taken."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hilbench.config import RunConfig
from hilbench.errors import ConfigError
from tests.cli_helpers import hilbench


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"budget": "800"}, "budget '800' is a str, not an integer"),
        ({"seed": True}, "seed True is a bool, not an integer"),
        ({"budget": 1.5}, "budget 1.5 is a float"),
    ],
)
def test_a_wrong_type_is_named(kw, words) -> None:
    with pytest.raises(ConfigError) as err:
        RunConfig(**kw)
    assert words in str(err.value) and "out of range" not in str(err.value)
    assert "\n" not in str(err.value)


def test_a_budget_typed_as_help_prints_it_is_taken(tmp_path: Path) -> None:
    trace = tmp_path / "t.h5"
    proc = hilbench("run", "--budget", "1,600", "--seed", "1_0", "--no-live", "--trace", str(trace))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(hilbench("report", str(trace), "--json").stdout)
    assert (data["forward_passes"], data["seed"]) == (1600, 10)
