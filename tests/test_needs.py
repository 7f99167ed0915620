"""tests/needs.py: a missing tool fails in one line; only hardware or CPU skips stand."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SAMPLE = """
import pytest
from tests.needs import need_module, need_tool

def test_oracle():
    need_module("no_such_module_hb19", "pip install no-such-module")

def test_tool():
    need_tool("no-such-tool-hb19", "apt-get install no-such-tool")

def test_present():
    assert need_tool("sh", "apt-get install dash").endswith("sh")
    assert need_module("json").dumps([1]) == "[1]"

def test_lazy_skip():
    pytest.skip("not installed here")

@pytest.mark.skipif(True, reason="tool missing")
def test_skipif():
    pass

def test_board():
    pytest.skip("needs device-measured timing: run with --board=PORT on a physical board")

def test_cpu():
    pytest.skip("avx512: this CPU (Foo) does not run these kernels, not tested here")

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False
"""


def outcomes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, **env: str):
    """Run SAMPLE in a pytest of its own with the plugin; (output, outcome by test name)."""
    for key in ("CI", "HILBENCH_ALLOW_MISSING"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_sample=SAMPLE)
    result = pytester.runpytest_subprocess(
        "-p", "tests.needs", "-p", "no:cacheprovider", "--junitxml=out.xml"
    )
    got = {}
    for case in ET.parse(pytester.path / "out.xml").iter("testcase"):
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        got[case.get("name")] = kinds.pop() if kinds else "passed"
    return result.stdout.str(), got


def test_missing_things_fail_and_only_hardware_skips_stand(pytester, monkeypatch):
    text, got = outcomes(pytester, monkeypatch)
    assert got == {
        "test_oracle": "failure",
        "test_tool": "failure",
        "test_present": "passed",
        "test_lazy_skip": "failure",
        "test_skipif": "error",  # a skip at setup fails the setup
        "test_board": "skipped",
        "test_cpu": "skipped",
        "test_xfail": "skipped",
    }
    assert (
        "Python module no_such_module_hb19 (no_such_module_hb19 is missing) is not installed: "
        "pip install no-such-module" in text
    )
    assert "no-such-tool-hb19 is not installed: apt-get install no-such-tool" in text
    assert "skipped, which would hide a test that proved nothing: not installed here" in text
    assert "Traceback" not in text and "During handling" not in text


def test_a_developer_may_ask_for_skips_but_not_ci(pytester, monkeypatch):
    _, got = outcomes(pytester, monkeypatch, HILBENCH_ALLOW_MISSING="1")
    assert got["test_oracle"] == got["test_tool"] == got["test_lazy_skip"] == "skipped"
    _, got = outcomes(pytester, monkeypatch, HILBENCH_ALLOW_MISSING="1", CI="true")
    assert got["test_oracle"] == got["test_tool"] == got["test_lazy_skip"] == "failure"
    assert got["test_board"] == "skipped"
