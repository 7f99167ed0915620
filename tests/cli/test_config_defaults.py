"""Naming the board once: HILBENCH_BOARD / HILBENCH_BAUD and [tool.hilbench] in the nearest
pyproject.toml, the command line winning (issue 14)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hilbench.config import DEFAULT_BAUD, RunConfig, find_pyproject, parse_baud, user_defaults
from hilbench.errors import ConfigError


def project(root: Path, table: str | None, sub: str = "a/b") -> Path:
    """A pyproject.toml at ``root`` (with ``table`` as its [tool.hilbench] body, or none) and a
    working directory ``sub`` below it."""
    text = '[project]\nname = "lab"\n'
    if table is not None:
        text += f"\n[tool.hilbench]\n{table}\n"
    (root / "pyproject.toml").write_text(text)
    cwd = root / sub
    cwd.mkdir(parents=True, exist_ok=True)
    return cwd


def test_nothing_named_means_the_emulator_at_the_default_speed(tmp_path):
    d = user_defaults(tmp_path, environ={})
    assert (d.board, d.baud, d.sources) == (None, DEFAULT_BAUD, {})
    assert DEFAULT_BAUD == 921_600 == RunConfig().baud


def test_the_nearest_pyproject_with_the_table_names_the_board(tmp_path):
    cwd = project(tmp_path, 'board = "/dev/ttyACM0"\nbaud = 115200')
    d = user_defaults(cwd, environ={})
    assert (d.board, d.baud) == ("/dev/ttyACM0", 115_200)
    assert d.sources == {
        "board": f"{tmp_path / 'pyproject.toml'} [tool.hilbench]",
        "baud": f"{tmp_path / 'pyproject.toml'} [tool.hilbench]",
    }
    # a pyproject without the table in between does not hide it
    (cwd / "pyproject.toml").write_text('[project]\nname = "inner"\n')
    assert find_pyproject(cwd) == tmp_path / "pyproject.toml"


def test_the_environment_wins_over_the_file(tmp_path):
    cwd = project(tmp_path, 'board = "/dev/ttyACM0"\nbaud = 115200')
    d = user_defaults(cwd, environ={"HILBENCH_BOARD": "socket://lab:5555"})
    assert (d.board, d.baud) == ("socket://lab:5555", 115_200)
    assert d.sources["board"] == "HILBENCH_BOARD"
    d = user_defaults(cwd, environ={"HILBENCH_BAUD": "460800"})
    assert (d.board, d.baud) == ("/dev/ttyACM0", 460_800)


@pytest.mark.parametrize(
    ("table", "environ", "needles"),
    [
        (None, {"HILBENCH_BOARD": "  "}, ["HILBENCH_BOARD is set but empty", "unset it"]),
        ('board = ""', {}, ["board = '' names no port", "remove the line"]),
        ("board = 3", {}, ["board = 3 names no port"]),
        ('bord = "/dev/ttyACM0"', {}, ["has no setting 'bord'", "board", "baud"]),
        ('baud = "fast"', {}, ["baud = 'fast' is not a baud rate", "921600"]),
        ("baud = 0", {}, ["baud = 0 is not a baud rate"]),
        (None, {"HILBENCH_BAUD": "9600x"}, ["HILBENCH_BAUD = '9600x' is not a baud rate"]),
        ("board = [", {}, ["is not valid TOML"]),
    ],
)
def test_a_bad_setting_names_itself_and_where_it_is(tmp_path, table, environ, needles):
    cwd = project(tmp_path, table) if table is not None else tmp_path
    with pytest.raises(ConfigError) as err:
        user_defaults(cwd, environ=environ)
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_baud_on_the_command_line():
    assert parse_baud("115200") == parse_baud("115_200") == 115_200
    with pytest.raises(ConfigError, match="--baud = 'x' is not a baud rate"):
        parse_baud("x")
    with pytest.raises(ConfigError, match="baud 10 is out of range"):
        RunConfig(backend="board", port="/dev/ttyACM0", baud=10)
    with pytest.raises(ConfigError, match="the board backend needs a port"):
        RunConfig(backend="board", port="  ")
