"""What a failing hilbench test prints: pytest's introspection in a few lines naming the trace,
then a compact "hilbench" section built from the trace; passing tests print nothing of it.

pytest runs in a subprocess (an in-process run cannot import h5py and the kernels twice).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from plugin_terminal import SAMPLE

from hilbench.trace import Trace

LABELS = (
    "device", "run", "accuracy", "steps", "events", "ended by", "trace", "kept", "open it", "no run"
)  # fmt: skip
LABELS += ("said",)  # the device's own words (LOG lines), the last rows of a run's block


def hilbench_sections(text: str) -> list[list[str]]:
    """The lines of each "---- hilbench ----" section of a pytest report."""
    sections: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if re.fullmatch(r"-+ hilbench -+", line):
            current = []
            sections.append(current)
        elif current is not None and line.startswith(LABELS):
            current.append(line)
        else:
            current = None
    return sections


def field(section: list[str], label: str) -> list[str]:
    """The text after ``label`` (padded to 9 columns) on each line that starts with it."""
    return [line[10:] for line in section if line[:10].rstrip() == label]


def run_pytest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_the_section_reports_the_run_from_its_trace(pytester):
    pytester.makepyfile(test_sample=SAMPLE)
    result = run_pytest(pytester)
    result.assert_outcomes(passed=2, failed=1)
    [section] = hilbench_sections(result.stdout.str())

    [path] = field(section, "trace")
    trace = Trace.open(path)
    final = trace.final
    assert trace.status == "complete" and final.forward_passes == 200
    assert field(section, "device") == [
        f"emulate: {trace.attrs['device_id']} (firmware {trace.attrs['firmware']}, protocol 1)"
    ]
    assert field(section, "run 0000") == ["complete: mlp on digits, fixed:2, seed 0"]
    assert field(section, "accuracy") == [
        f"{final.accuracy:.2%}  loss {final.loss:.4f} nats (test), {final.train_loss:.4f} (train)"
    ]
    assert field(section, "steps") == [f"{final.steps} (200 of 200 forward passes)"]
    counts = trace.event_counts()
    expected = ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) if counts else "none"
    assert field(section, "events") == [expected]
    [command] = field(section, "open it")
    assert command == f"hilbench report {path}"
    assert "test_reaches_99" in path  # the failing test's trace, not the passing one's

    opened = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=120)
    assert opened.returncode == 0, opened.stderr
    assert f"{final.accuracy:.1%}" in opened.stdout or f"{final.accuracy:.2%}" in opened.stdout


def test_passing_tests_stay_quiet_even_with_rA(pytester):
    pytester.makepyfile(
        test_sample="""
        def test_learns(zo_session):
            assert zo_session(budget=200, scheduler="fixed:2").result.steps == 50
        """
    )
    result = run_pytest(pytester, "-rA")
    result.assert_outcomes(passed=1)
    assert "PASSED test_sample.py::test_learns" in result.stdout.str()
    assert hilbench_sections(result.stdout.str()) == []
    assert "hilbench report" not in result.stdout.str()


@pytest.mark.parametrize("verbosity", ["-q", "-vv"])  # 240-character reprs, then unlimited
def test_assertion_introspection_is_three_lines_naming_the_trace(pytester, verbosity):
    pytester.makepyfile(test_sample=SAMPLE)
    result = run_pytest(pytester, verbosity, "-k", "reaches_99")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    explained = [line for line in text.splitlines() if line.startswith("E ")]
    [path] = field(hilbench_sections(text)[0], "trace")

    # assert, where ... = <RunResult>.final_accuracy, where <RunResult> = <SessionOutcome>.result
    assert len(explained) == 3, "\n".join(explained)
    # the repr names the trace where the test wrote it; the section, the copy kept of it
    assert all(Path(path).name in line for line in explained[1:])
    assert all(len(line) < 2 * len(path) + 200 for line in explained)
    for noise in ("\\x", "config_json", "PosixPath", "attrs=", "units=", "model_blob"):
        assert noise not in text


def test_each_run_of_a_test_is_listed_with_its_run_id(pytester):
    pytester.makepyfile(
        test_sample="""
        def test_two_schedules(zo_session):
            a = zo_session(budget=200, scheduler="fixed:2")
            b = zo_session(budget=200, scheduler="fixed:1")
            assert b.result.final_accuracy > a.result.final_accuracy + 0.5
        """
    )
    result = run_pytest(pytester)
    result.assert_outcomes(failed=1)
    [section] = hilbench_sections(result.stdout.str())
    assert len(field(section, "device")) == 1  # one device, said once
    assert field(section, "run 0000") == ["complete: mlp on digits, fixed:2, seed 0"]
    assert field(section, "run 0001") == ["complete: mlp on digits, fixed:1, seed 0"]
    commands = field(section, "open it")
    assert [c.rsplit(" ", 2)[1:] for c in commands] == [["--run", "0000"], ["--run", "0001"]]
    path = field(section, "trace")[0]
    for run_id, accuracy in zip(("0000", "0001"), field(section, "accuracy"), strict=True):
        assert accuracy.startswith(f"{Trace.open(path, run=run_id).final_accuracy:.2%}")


def test_a_run_that_died_says_how_it_ended(pytester):
    pytester.makepyfile(
        test_sample="""
        def test_board_unplugged(zo_session, device, monkeypatch):
            real, calls = device.apply_probe_losses, []  # the trainer's call every step

            def dies(*args, **kwargs):
                calls.append(1)
                if len(calls) > 10:
                    raise RuntimeError("board unplugged at step 11")
                return real(*args, **kwargs)

            monkeypatch.setattr(device, "apply_probe_losses", dies)
            zo_session(budget=400, scheduler="fixed:2")
        """
    )
    result = run_pytest(pytester)
    result.assert_outcomes(failed=1)
    [section] = hilbench_sections(result.stdout.str())
    [path] = field(section, "trace")
    trace = Trace.open(path)
    assert trace.status == "failed" and 0 < trace.n_steps < 100
    assert field(section, "run 0000") == ["failed: mlp on digits, fixed:2, seed 0"]
    assert field(section, "steps") == [
        f"{trace.n_steps} ({trace.forward_passes} of 400 forward passes)"
    ]
    assert field(section, "ended by") == ["RuntimeError: board unplugged at step 11"]
    counts = trace.event_counts()
    assert counts["error"] == 1  # the exception that ended the run (retries depend on load)
    assert "injected" not in counts
    assert field(section, "events") == [", ".join(f"{k} {n}" for k, n in sorted(counts.items()))]
    evals = trace.evals[trace.evals["split"] == "test"]
    assert field(section, "accuracy")[0].startswith(
        f"{evals['accuracy'][-1]:.2%} at {evals['forward_passes'][-1]} forward passes  loss "
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            "zo_session(budgte=200)",
            "hilbench: zo_session() has no setting 'budgte' (did you mean 'budget'?). "
            "use one of: model, dataset, *, budget, *",
        ),
        ("zo_session(budget=1)", "hilbench: zo_session(): budget 1 is out of range*"),
        (
            "zo_session(port='/dev/ttyACM0')",
            "hilbench: zo_session(port=...) is not a test's to choose*use --board=PORT",
        ),
    ],
)
def test_a_setting_the_run_refuses_is_one_line_and_no_section(pytester, call, message):
    pytester.makepyfile(test_sample=f"def test_typo(zo_session):\n    {call}\n")
    result = run_pytest(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([message])
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if " FAILURES " in line)
    end = next(i for i, line in enumerate(lines) if " short test summary " in line)
    failure = lines[start + 1 : end]
    assert len(failure) == 2 and failure[0].startswith("_"), failure  # the name, one line
    assert hilbench_sections(result.stdout.str()) == []  # no run: the error says it all


def test_injected_faults_are_counted_from_the_trace(pytester):
    pytester.makepyfile(test_sample=SAMPLE)
    result = run_pytest(pytester, "--link-faults", "drop=0.02,corrupt=0.02,seed=3", "-k", "99")
    result.assert_outcomes(failed=1)
    [section] = hilbench_sections(result.stdout.str())
    [path] = field(section, "trace")
    counts = Trace.open(path).event_counts()
    assert counts.get("injected", 0) > 0 and "error" not in counts
    assert field(section, "events") == [", ".join(f"{k} {n}" for k, n in sorted(counts.items()))]


def test_a_board_is_named_with_its_port(pytester):
    from tests.cli_helpers import emulator_on_tcp

    pytester.makepyfile(test_sample=SAMPLE)
    with emulator_on_tcp() as url:
        result = run_pytest(pytester, f"--board={url}", "-k", "reaches_99")
    result.assert_outcomes(failed=1)
    [section] = hilbench_sections(result.stdout.str())
    [device] = field(section, "device")
    assert device.startswith(f"board {url}: hilbench-twin (firmware ")
    assert Path(field(section, "trace")[0]).exists()
