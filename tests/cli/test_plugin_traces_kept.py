"""The pytest plugin's trace files: one per test even when parametrized ids differ only in
``/``, ``_`` or a space (issue 26, item 4), and a failing test's trace kept where it outlives
pytest's temporary directory, the hint saying where and naming --trace-dir (item 5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hilbench.pytest_plugin import trace_file_name

THREE_IDS = """
import pytest

@pytest.mark.parametrize("name", ["a/b", "a_b", "a b"])
def test_train(zo_session, name):
    zo_session(budget=80, seed=len(name))
"""

FAILS = """
def test_fails(zo_session):
    zo_session(budget=80)
    assert False, "look at the trace"
"""


@pytest.fixture(autouse=True)
def no_board_in_the_environment(monkeypatch):
    for name in [k for k in os.environ if k.startswith("HILBENCH_")]:
        monkeypatch.delenv(name)


def test_ids_that_differ_in_slash_underscore_or_space_get_distinct_files() -> None:
    names = {trace_file_name(f"t.py::test_train[{i}]") for i in ("a/b", "a_b", "a b")}
    assert len(names) == 3
    assert trace_file_name("t.py::test_x") == "t.py_test_x.h5"  # unparametrized: as before


def test_three_such_tests_write_three_traces(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ids=THREE_IDS)
    traces = pytester.path / "traces"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--trace-dir={traces}")
    result.assert_outcomes(passed=3)
    assert len(list(traces.glob("*.h5"))) == 3


def test_a_failing_tests_trace_is_kept_outside_pytests_temporary_directory(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_fails=FAILS)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    kept = [line.split(None, 1)[1] for line in out.splitlines() if line.startswith("trace ")]
    assert kept, out
    path = Path(kept[0].strip())
    assert path.exists(), path
    # in the project's pytest cache, not in the session's temporary directory (basetemp)
    assert path.parent == pytester.path / ".pytest_cache" / "d" / "hilbench-failed-traces"
    assert "--trace-dir" in out and f"hilbench report {path}" in out
