"""The pytest side of a lab user's first hour (issue 14): one line where a traceback was,
--baud, and the board named once. pytest runs in a subprocess, as a user runs it."""

from __future__ import annotations

import os

import pytest

from tests.cli_helpers import emulator_on_tcp

NAMES_THE_DEVICE = """
def test_device(device):
    print("DEVICE", device.name)
    assert device.info is not None
"""


def run_pytest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", *args)


@pytest.fixture(autouse=True)
def no_board_in_the_environment(monkeypatch):
    for name in [k for k in os.environ if k.startswith("HILBENCH_")]:
        monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("make", "value", "needle"),
    [
        (lambda p: p.joinpath("afile").write_text(""), "afile", "exists and is not a directory"),
        (lambda p: None, "/proc/traces", "cannot be created"),
        (lambda p: None, "", "--trace-dir is empty"),
    ],
    ids=["a-file", "uncreatable", "empty"],
)
def test_a_trace_dir_that_cannot_be_used_is_one_line(pytester, make, value, needle):
    make(pytester.path)
    pytester.makepyfile(test_sample=NAMES_THE_DEVICE)
    result = run_pytest(pytester, f"--trace-dir={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "ERROR: hilbench: --trace-dir" in err and needle in err, err
    assert "Traceback" not in err and "pathlib" not in err


def test_a_refused_board_says_its_cause_once(pytester):
    pytester.makepyfile(test_sample=NAMES_THE_DEVICE)
    result = run_pytest(pytester, "--board=socket://127.0.0.1:1")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    # the error section names the cause once; the short summary repeats its first line only
    # (cut or not depending on the terminal's width), so it is counted apart
    report, _, summary = out.partition("short test summary info")
    assert report.count("Connection refused") == 1, report
    assert summary.count("Connection refused") <= 1, summary
    assert "During handling of the above exception" not in out
    assert "Could not open port" not in out  # the port is named once, by hilbench


def test_the_board_named_in_pyproject_or_the_environment_is_used(pytester):
    pytester.makepyfile(test_sample=NAMES_THE_DEVICE)
    with emulator_on_tcp() as url:
        pytester.makepyprojecttoml(f'[tool.hilbench]\nboard = "{url}"\nbaud = 460800\n')
        result = run_pytest(pytester)
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines([f"*DEVICE {url}"])
        # --emulate wins over the file
        result = run_pytest(pytester, "--emulate")
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*DEVICE emulator (/dev/pts/*)"])
        # a --baud for the board is taken; for the emulator it is a mistake
        result = run_pytest(pytester, "--baud=115200")
        result.assert_outcomes(passed=1)
        result = run_pytest(pytester, "--emulate", "--baud=115200")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert "--baud sets a board's speed, not --emulate's" in result.stderr.str()


def test_a_blank_board_in_the_environment_is_refused(pytester, monkeypatch):
    pytester.makepyfile(test_sample=NAMES_THE_DEVICE)
    monkeypatch.setenv("HILBENCH_BOARD", "")
    result = run_pytest(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "HILBENCH_BOARD is set but empty" in result.stderr.str()
    result.stdout.no_fnmatch_line("*passed*")


def test_baud_is_the_runs_not_a_tests(pytester):
    pytester.makepyfile(
        test_sample="def test_baud(zo_session):\n    zo_session(budget=80, baud=115200)\n"
    )
    result = run_pytest(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*zo_session(baud=...) is not a test's to choose*--baud=RATE*"])
