"""pytest's own reporting on a real terminal, with the live panel on: nothing of it is lost.

Each run happens on a pty and is read back as a screen (plugin_terminal). The live panel must
really be drawn (its bytes are in the stream), and the screen it leaves must be the screen of
the same run with --no-live: names on the progress lines, every F, the summaries.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from plugin_terminal import PANEL_MARK, SAMPLE, normalized, project, run_in_terminal, tmux_screen

from tests.needs import need_module, need_tool

#: Option sets a user runs, and what the progress part of the screen must show for each.
PROGRESS = {
    "-q": [r"^\.F\.\s+\[100%\]$"],
    "": [r"^test_sample\.py \.F\.\s+\[100%\]$"],
    "-v": [
        r"^test_sample\.py::test_learns PASSED\s+\[ 33%\]$",
        r"^test_sample\.py::test_reaches_99 FAILED\s+\[ 66%\]$",
        r"^test_sample\.py::test_plain PASSED\s+\[100%\]$",
    ],
    "-vv -rA --tb=short": [
        r"^test_sample\.py::test_learns PASSED\s+\[ 33%\]$",
        r"^test_sample\.py::test_reaches_99 FAILED\s+\[ 66%\]$",
        r"^PASSED test_sample\.py::test_learns$",
        r"^FAILED test_sample\.py::test_reaches_99 - assert 0\.\d+ > 0\.99$",
    ],
    "-x --tb=line": [
        r"^test_sample\.py \.F$",
        r"^!+ stopping after 1 failures !+$",
    ],
    "--tb=no -rA": [
        r"^test_sample\.py \.F\.\s+\[100%\]$",
        r"^FAILED test_sample\.py::test_reaches_99",
    ],
}


def _matches(lines: list[str], pattern: str) -> bool:
    return any(re.search(pattern, line) for line in lines)


@pytest.mark.parametrize("options", list(PROGRESS), ids=lambda o: o or "default")
def test_the_live_panel_leaves_pytests_screen_as_no_live_does(tmp_path, options):
    where = project(tmp_path / "p")
    args = ["-p", "no:cacheprovider", *options.split()]
    base = ["--basetemp", str(tmp_path / "base")]  # the same paths in both runs' reports
    live = run_in_terminal(where, *args, *base)
    quiet = run_in_terminal(where, *args, *base, "--no-live")

    assert live.panel_drawn, "the live panel was not shown: this test would check nothing"
    assert not quiet.panel_drawn
    assert live.status == quiet.status == 1
    for pattern in PROGRESS[options]:
        assert _matches(live.lines, pattern), f"{pattern!r} not on the screen:\n{live.text}"
    assert normalized(live.lines) == normalized(quiet.lines)

    if "--tb=line" in options:  # the one line, wrapped on the screen
        # (a space where the screen wraps is lost when the rows are joined)
        assert re.search(r"/test_sample\.py:8: ?assert ?0\.\d+ ?> ?0\.99", live.joined())

    # one hilbench section: the failing test's (never a passing one's), wherever pytest shows
    # sections (with every --tb but no)
    sections = [line for line in live.lines if re.fullmatch(r"-+ hilbench -+", line)]
    assert len(sections) == (0 if "--tb=no" in options else 1)
    assert "\\x" not in live.text and "config_json" not in live.text


def test_long_names_that_wrap_on_a_narrow_terminal_stay_whole(tmp_path):
    source = SAMPLE.replace("test_learns", "test_learns_with_a_name_far_longer_than_the_terminal")
    where = project(tmp_path / "p", source)
    args = ["-p", "no:cacheprovider", "-v", "--tb=no"]
    live = run_in_terminal(where, *args, columns=40, rows=30)
    quiet = run_in_terminal(where, *args, "--no-live", columns=40, rows=30)

    assert live.panel_drawn
    assert normalized(live.lines) == normalized(quiet.lines)
    assert "test_sample.py::test_learns_with_a_name_far_longer_than_the_terminal PASSED" in (
        live.joined()
    )


def test_no_room_below_the_line_means_no_panel(tmp_path):
    where = project(tmp_path / "p")
    screen = run_in_terminal(where, "-p", "no:cacheprovider", "-v", "--tb=no", rows=8)
    assert not screen.panel_drawn  # 5 lines of panel + pytest's line + slack do not fit in 8
    assert _matches(screen.lines, r"^test_sample\.py::test_reaches_99 FAILED\s+\[ 66%\]$")


def test_xdist_workers_draw_nothing_and_the_report_arrives(tmp_path):
    need_module("xdist")
    where = project(tmp_path / "p")
    screen = run_in_terminal(where, "-p", "no:cacheprovider", "-n", "2", "-v")

    assert screen.status == 1
    assert not screen.panel_drawn  # a worker has no terminal of its own
    for name, word in (("test_learns", "PASSED"), ("test_reaches_99", "FAILED")):
        assert _matches(screen.lines, rf"^\[gw\d\] \[\s*\d+%\] {word} test_sample\.py::{name}$")
    assert sum(bool(re.fullmatch(r"-+ hilbench -+", line)) for line in screen.lines) == 1
    assert "hilbench report " in screen.joined()


def test_last_failed_reruns_the_failure_by_name(tmp_path):
    where = project(tmp_path / "p")
    first = run_in_terminal(where, "-v")
    assert first.status == 1 and first.panel_drawn
    again = run_in_terminal(where, "-v", "--lf")
    assert again.status == 1 and again.panel_drawn
    assert _matches(again.lines, r"^run-last-failure: rerun previous 1 failure")
    assert _matches(again.lines, r"^test_sample\.py::test_reaches_99 FAILED\s+\[100%\]$")
    assert not _matches(again.lines, r"test_learns (PASSED|FAILED)")


def test_junit_xml_is_whole_with_the_panel_on(tmp_path):
    where = project(tmp_path / "p")
    junit = tmp_path / "junit.xml"
    screen = run_in_terminal(where, "-p", "no:cacheprovider", f"--junitxml={junit}")
    assert screen.panel_drawn
    assert re.search(r"generated xml file: .*junit\.xml", screen.joined())  # path may wrap

    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    assert sorted(cases) == ["test_learns", "test_plain", "test_reaches_99"]
    failure = cases["test_reaches_99"].find("failure")
    assert failure is not None and failure.get("message", "").startswith("assert 0.")
    assert cases["test_learns"].find("failure") is None
    props = {p.get("name"): p.get("value") for p in cases["test_reaches_99"].iter("property")}
    assert props["hilbench.forward_passes"] == "200"
    assert props["hilbench.trace"].endswith("test_sample.py_test_reaches_99.h5")


@pytest.mark.parametrize("columns", [100, 37])
def test_tmux_shows_the_same_screen_with_and_without_the_panel(tmp_path, columns):
    """tmux is a terminal emulator of its own: the check does not rest on pyte alone."""
    need_tool("tmux", "apt-get install tmux")
    where = project(tmp_path / "p")
    args = ["-p", "no:cacheprovider", "-v", "--tb=no"]
    live, raw = tmux_screen(where, *args, columns=columns)
    quiet, _ = tmux_screen(where, *args, "--no-live", columns=columns)

    assert PANEL_MARK in raw, "the live panel was not shown: this test would check nothing"
    assert normalized(live) == normalized(quiet)
    text = "".join(live)
    for name, word in (("learns", "PASSED"), ("reaches_99", "FAILED"), ("plain", "PASSED")):
        assert f"test_sample.py::test_{name} {word}" in text
