"""Issue 26 item 9: a test's mistakes in zo_session() and check() fail it in one line naming
the cause and the fix, with no traceback (no source lines, no numpy arrays printed)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def _message(block: str) -> list[str]:
    """The failure's own lines: between the test's header and the hilbench section."""
    lines = block.splitlines()[1:]
    end = next(
        (
            i
            for i, line in enumerate(lines)
            if line.startswith(("-----", "=====")) or "short test summary" in line
        ),
        len(lines),
    )
    return [line for line in lines[:end] if line.strip()]


def _failure_text(result: pytest.RunResult, test: str) -> str:
    """The failure block of one test: from its ____ header to the next one."""
    text = result.stdout.str()
    start = text.index(f"_ {test} _")
    end = text.find("\n___", start + 1)
    end = text.find("short test summary", start) if end < 0 else end
    return text[start:end]


@pytest.mark.parametrize(
    ("call", "says"),
    [
        ('zo_session(model="resnet", budget=100)', "unknown model 'resnet'"),
        ('zo_session(dataset="mnist", budget=100)', "unknown dataset 'mnist'"),
        ("zo_session(scheduler=4, budget=100)", "scheduler 4 is of type int, not text"),
    ],
)
def test_bad_setting_is_one_line(pytester: pytest.Pytester, call: str, says: str) -> None:
    pytester.makepyfile(f"def test_it(zo_session):\n    {call}\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--no-live")
    result.assert_outcomes(failed=1)
    block = _failure_text(result, "test_it")
    assert says in block
    assert "Traceback" not in block and "array(" not in block
    assert "AttributeError" not in block
    # the failure itself is one line, "hilbench: zo_session(): ...", with no source shown
    lines = _message(block)
    assert len(lines) == 1, block
    assert lines[0].startswith("hilbench: zo_session(): "), lines
    assert says in lines[0]
    assert ".py:" not in block
    assert block.count(says) == 1, block  # said once, not again in a hilbench section
    assert "- hilbench -" not in block  # no run was written: no hilbench section


def test_check_with_a_tuple_is_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "def test_it(zo_session):\n"
        "    out = zo_session(budget=200)\n"
        '    out.check(("final_accuracy", 0.5))\n'
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--no-live")
    result.assert_outcomes(failed=1)
    block = _failure_text(result, "test_it")
    lines = _message(block)
    assert len(lines) == 1, block
    assert "check() takes Limit objects, not tuple" in lines[0]
    assert 'Limit("final_accuracy", low=0.5)' in lines[0]
    assert "AttributeError" not in block


def test_link_faults_reset_every_frame_is_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_it(zo_session):\n    zo_session(budget=200)\n")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--no-live", "--link-faults=reset=1"
    )
    result.assert_outcomes(failed=1)
    block = _failure_text(result, "test_it")
    lines = _message(block)
    assert len(lines) == 1, block
    assert "injected by --link-faults reset=1" in lines[0], lines
    assert "device_client.py" not in block  # no source of hilbench shown
