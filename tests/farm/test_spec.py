"""Parsing --board labgrid:... / map:..., and routing them (no labgrid needed)."""

from __future__ import annotations

import pytest

from hilbench.backend.registry import make_backend
from hilbench.backend.serial import SerialBackend
from hilbench.config import RunConfig
from hilbench.errors import ConfigError
from hilbench.farm.spec import Selector, coordinator_address, parse_board, wait_seconds
from tests.needs import need_module


def test_places_tags_and_maps_parse():
    assert parse_board("labgrid:n6-1").selector == Selector(name="n6-1")
    spec = parse_board(" labgrid:board=stm32n6570_dk,desk=2 ")
    assert spec.kind == "labgrid"
    assert spec.selector.tags == {"board": "stm32n6570_dk", "desk": "2"}
    assert spec.selector.filters == {"board": "stm32n6570_dk", "desk": "2"}
    assert parse_board("labgrid:n6-1").selector.filters == {"name": "n6-1"}
    m = parse_board("map:lab/boards.toml:board=n6")
    assert (m.kind, m.map_file, m.selector.tags) == ("map", "lab/boards.toml", {"board": "n6"})
    assert parse_board("map:boards.toml").selector == Selector()
    assert parse_board("map:boards.toml:n6-a").selector.name == "n6-a"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("labgrid:", "names no place"),
        ("labgrid:a b", "is not a place name"),
        ("labgrid:board=", "is not TAG=VALUE"),
        ("labgrid:Board=x", "is not a labgrid tag name"),
        ("labgrid:board=a b", "characters labgrid tags cannot hold"),
        ("labgrid:board=a,board=b", "gives tag 'board' twice"),
        ("labgrid:name=x", "'name' is not a tag"),
        ("map:", "names no board map file"),
    ],
)
def test_bad_board_values_say_what_to_write(text, needle):
    with pytest.raises(ConfigError, match=needle) as caught:
        parse_board(text)
    assert "\n" not in str(caught.value)


def test_environment_settings():
    assert coordinator_address({}) == "127.0.0.1:20408"
    assert coordinator_address({"LG_COORDINATOR": "lab:20408"}) == "lab:20408"
    assert wait_seconds({}) == 120.0
    assert wait_seconds({"HILBENCH_FARM_WAIT": "2.5"}) == 2.5
    with pytest.raises(ConfigError, match="HILBENCH_FARM_WAIT='soon' is not a number"):
        wait_seconds({"HILBENCH_FARM_WAIT": "soon"})


def test_make_backend_routes_farm_boards_and_leaves_others(tmp_path):
    from hilbench.backend.map import MapBackend

    assert isinstance(make_backend(RunConfig(backend="board", port="socket://h:1")), SerialBackend)
    board_map = tmp_path / "b.toml"
    assert isinstance(make_backend(RunConfig(backend="board", port=f"map:{board_map}")), MapBackend)
    need_module("labgrid", "pip install -e '.[farm]' (the dev extra includes it)")
    from hilbench.backend.labgrid import LabgridBackend

    backend = make_backend(RunConfig(backend="board", port="labgrid:board=x"))
    assert isinstance(backend, LabgridBackend)
    assert backend.spec.selector.tags == {"board": "x"}


def test_hilbench_without_labgrid_does_not_import_it():
    import subprocess
    import sys

    code = (
        "import sys, hilbench.backend.registry, hilbench.session, hilbench.pytest_plugin\n"
        "import hilbench.cli\n"
        "print('labgrid' in sys.modules, 'hilbench.farm.client' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
