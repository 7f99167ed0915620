"""The trace commands as a user meets them, in subprocesses: report, compare, replay, watch;
crash safety of a real ``hilbench run`` (SIGKILL, SIGINT, SIGTERM); one clear line for a bad
file."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from hilbench.trace import Trace, TraceWriter
from tests.cli_helpers import DEFAULT_SCHEDULER, ROOT, default_steps, hilbench

PNG = b"\x89PNG\r\n\x1a\n"


def assert_one_clear_line(proc: subprocess.CompletedProcess, *needles: str, code: int = 2):
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two short finished runs made with ``hilbench run``."""
    d = tmp_path_factory.mktemp("runs")
    a, b = d / "a.h5", d / "b.h5"
    for path, extra in ((a, ["--seed", "1"]), (b, ["--seed", "2", "--scheduler", "fixed:2"])):
        proc = hilbench(
            "run",
            "--budget",
            "1600",
            "--eval-every",
            "400",
            "--no-live",
            "--trace",
            str(path),
            *extra,
        )
        assert proc.returncode == 0, proc.stderr
    return a, b


# ---------------------------------------------------------------- report, compare, replay


def test_report_json_table_and_plots(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = runs
    data = json.loads(hilbench("report", str(a), "--json").stdout)
    assert (data["status"], data["forward_passes"], data["steps"]) == (
        "complete",
        1600,
        default_steps(1600),
    )
    assert data["scheduler"] == DEFAULT_SCHEDULER
    # link events (a retry when the machine is busy) are counted, whatever happened
    assert all(isinstance(k, str) and v >= 1 for k, v in data["events"].items())
    probe = [t for t in data["timing"] if t["command"] == "PROBE"]
    assert {t["source"] for t in probe} == {"host", "modeled"}  # never pooled
    assert all(t["p50"] <= t["p99"] <= t["max"] for t in probe)
    human = hilbench("report", str(a), "--plot", str(tmp_path / "plots"))
    assert human.returncode == 0, human.stderr
    assert "final_accuracy" in human.stdout and "modeled" in human.stdout
    for name in ("accuracy", "loss", "q", "timing"):
        png = tmp_path / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == PNG and png.stat().st_size > 10_000, name
        assert str(png) in human.stdout


def test_compare_side_by_side_with_one_plot(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = runs
    rows = json.loads(hilbench("compare", str(a), str(b), "--json", "--at", "800").stdout)
    assert [r["scheduler"] for r in rows] == [DEFAULT_SCHEDULER, "fixed:2"]
    assert [r["steps"] for r in rows] == [default_steps(1600), 400]
    assert all(r["at_forward_passes"] == 800 and 0 <= r["accuracy_at"] <= 1 for r in rows)
    assert rows[0]["accuracy_at"] == Trace.open(a).accuracy_at(800)
    # the per-step PROBE time: after the first step it travels in APPLY_PROBE
    tm = Trace.open(a).timing
    steps = tm[(tm["command"] == "APPLY_PROBE") & (tm["source"] == "modeled")]
    alone = tm[(tm["command"] == "PROBE") & (tm["source"] == "modeled")]
    assert (
        len(steps) + len(alone) == default_steps(1600) and len(alone) <= 4
    )  # the first, and after evals
    assert rows[0]["probe_source"] == "modeled"
    assert rows[0]["probe_p50_s"] == pytest.approx(float(np.median(steps["duration_s"])))
    plot = tmp_path / "cmp" / "both.png"
    human = hilbench("compare", str(a), str(b), "--plot", str(plot))
    assert human.returncode == 0, human.stderr
    assert "a.h5" in human.stdout and "b.h5" in human.stdout and "fixed:2" in human.stdout
    assert plot.read_bytes()[:8] == PNG and plot.stat().st_size > 20_000


def test_replay_matches_and_a_tampered_trace_is_one_line(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _ = runs
    ok = hilbench("replay", str(a))
    assert ok.returncode == 0, ok.stderr
    assert f"replay OK: {default_steps(1600)} steps" in ok.stdout
    tampered = tmp_path / "tampered.h5"
    shutil.copy(a, tampered)
    with h5py.File(tampered, "r+") as f:
        samples = f["runs/0000/samples"]
        row = samples[17]
        row["coeff"] += 3 * 65536
        samples[17] = row
    bad = hilbench("replay", str(tampered))
    assert_one_clear_line(
        bad, "replay MISMATCH", f"{default_steps(1600)} steps", "device reported", code=1
    )


# ---------------------------------------------------------------- a real run, killed


def _start_run(path: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hilbench",
            "run",
            "--budget",
            "2000000",
            "--no-live",
            "--trace",
            str(path),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a SIGINT must reach Python's handler even if this test runs with SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for_steps(proc: subprocess.Popen, path: Path, n: int = 50) -> int:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if path.exists():
            try:
                steps = Trace.open(path).n_steps
            except Exception:  # being created: try again
                steps = 0
            if steps >= n:
                return steps
        time.sleep(0.2)
    raise AssertionError("the run wrote no steps in 90 s")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_leave_a_finished_interrupted_trace(
    tmp_path: Path, sig: signal.Signals
) -> None:
    path = tmp_path / "run.h5"
    proc = _start_run(path)
    try:
        seen = _wait_for_steps(proc, path)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == (143 if sig == signal.SIGTERM else 130), err
    tr = Trace.open(path)
    # one line naming the signal, the run, the file, what is on disk and how to continue
    assert err.splitlines() == [
        f"hilbench: {'SIGTERM' if sig == signal.SIGTERM else 'Ctrl-C'}: run 0000 of {path} "
        f"stopped after {tr.n_steps:,} steps ({tr.forward_passes:,} of 2,000,000 forward "
        f"passes), all on disk; continue it with `hilbench run --resume {path}`"
    ], err
    assert (tr.status, tr.finished) == ("interrupted", True)
    assert tr.n_steps >= seen  # the buffered steps were flushed too
    assert tr.steps["step"].tolist() == list(range(tr.n_steps))
    assert len(tr.samples) == int(tr.steps["q"].sum())
    assert tr.events["kind"].tolist()[-1] == "interrupt"
    assert tr.events["detail"].tolist()[-1] == (
        "SIGTERM" if sig == signal.SIGTERM else "Ctrl-C (SIGINT)"
    )
    with h5py.File(path, "r") as f:  # closed cleanly: plain HDF5 tools open it
        assert f["runs/0000/steps"].compression == "gzip"
    rs = tr.resume_state()  # what `hilbench run --resume` continues from
    assert rs.resumable and rs.next_step == tr.n_steps
    # interrupted runs record no final weights CRC: replay says so in one line
    assert_one_clear_line(
        hilbench("replay", str(path)), "records no final weights CRC", "'interrupted'"
    )


def test_kill_9_leaves_a_readable_running_trace(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    proc = _start_run(path)
    try:
        seen = _wait_for_steps(proc, path)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    tr = Trace.open(path)
    assert (tr.status, tr.finished) == ("running", False)
    assert tr.n_steps >= seen and tr.steps["step"].tolist() == list(range(tr.n_steps))
    rs = tr.resume_state()
    assert rs.resumable and rs.next_step == tr.n_steps
    assert rs.forward_passes == int(tr.steps["forward_passes"][-1])
    report = json.loads(hilbench("report", str(path), "--json").stdout)
    assert report["status"] == "running" and report["steps"] == tr.n_steps
    watch = hilbench("watch", str(path), "--interval", "0.2", timeout=60)
    assert watch.returncode == 1, watch.stderr
    assert "writer of" in watch.stderr and "is gone" in watch.stderr
    # what run --resume builds on: the writer takes the orphaned file over
    with TraceWriter.resume(path) as w:
        assert (w.steps_written, w.current_step) == (tr.n_steps, tr.n_steps)
        assert w.forward_passes == rs.forward_passes
    assert Trace.open(path).events["kind"].tolist()[-1] == "resume"


def test_watch_follows_a_live_run_to_its_end(tmp_path: Path) -> None:
    path = tmp_path / "live.h5"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hilbench",
            "run",
            "--budget",
            "16000",
            "--no-live",
            "--trace",
            str(path),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        watch = hilbench("watch", str(path), "--interval", "0.2", timeout=120)
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, run.stderr.read() if run.stderr else ""
    assert watch.returncode == 0, watch.stderr
    lines = watch.stdout.splitlines()
    assert lines[0].startswith("hilbench watch · ") and "mlp on digits" in lines[0]
    progress = [line for line in lines if line.startswith("[watch] running")]
    assert progress, watch.stdout  # it saw the run in progress ...
    last = default_steps(16_000) - 1
    assert lines[-2].startswith(f"[watch] complete step {last}") and "16,000/16,000" in lines[-2]
    assert lines[-1] == "run 0000 finished: complete"  # ... and exited when it ended


def test_watch_on_a_finished_file_shows_it_and_exits(runs: tuple[Path, Path]) -> None:
    a, _ = runs
    proc = hilbench("watch", str(a))
    assert proc.returncode == 0, proc.stderr
    last = default_steps(1600) - 1
    assert f"[watch] complete step {last} " in proc.stdout and "1,600/1,600" in proc.stdout


# ---------------------------------------------------------------- bad input, one line


@pytest.fixture(scope="module")
def bad_files(runs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> dict:
    a, _ = runs
    d = tmp_path_factory.mktemp("bad")
    text = d / "notes.h5"
    text.write_text("step,loss\n")
    foreign = d / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f["x"] = [1, 2, 3]
    truncated = d / "truncated.h5"
    truncated.write_bytes(a.read_bytes()[: a.stat().st_size // 2])
    newer = d / "newer.h5"
    shutil.copy(a, newer)
    with h5py.File(newer, "r+") as f:
        f.attrs["format_version"] = 7
        f.attrs["written_by"] = "hilbench 3.2.0"
    return {
        "missing": (d / "missing.h5", ["no trace file at", "missing.h5"]),
        "text": (text, ["notes.h5 is not an HDF5 file"]),
        "foreign": (foreign, ["foreign.h5 is an HDF5 file but not a hilbench trace"]),
        "truncated": (truncated, ["truncated.h5 is truncated"]),
        "newer": (
            newer,
            [
                "trace format version 7 (written by hilbench 3.2.0)",
                "reads format version 3",
                "upgrade hilbench to 3.2.0 or newer",
            ],
        ),
    }


CASES = [
    *(
        (cmd, kind)
        for cmd in ("report", "replay")
        for kind in ("missing", "text", "foreign", "truncated", "newer")
    ),
    *((cmd, kind) for cmd in ("watch", "compare") for kind in ("missing", "truncated", "newer")),
]


@pytest.mark.parametrize(("command", "kind"), CASES)
def test_bad_files_get_one_clear_line(bad_files: dict, command: str, kind: str) -> None:
    path, needles = bad_files[kind]
    assert_one_clear_line(hilbench(command, str(path)), *needles)


def test_an_unknown_run_and_a_bad_plot_dir_are_named(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _ = runs
    assert_one_clear_line(
        hilbench("report", str(a), "--run", "0007"), "has no run '0007'; it has 0000"
    )
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_one_clear_line(
        hilbench("report", str(a), "--plot", str(blocker / "plots")),
        "cannot create the plot directory",
    )


def test_trace_files_written_by_this_suite_have_no_leftovers(runs: tuple[Path, Path]) -> None:
    a, _ = runs
    assert sorted(p.name for p in a.parent.iterdir()) == ["a.h5", "b.h5"]
    assert os.access(a, os.R_OK)


# ---------------------------------------------------------------- the pytest plugin's side

LIMITS_SAMPLE = """
import pytest
from hilbench.trace.limits import Limit

def test_limits_pass_and_warn(zo_session):
    outcome = zo_session(budget=400, scheduler="fixed:2", seed=3)
    assert outcome.replay.matches and outcome.replay.steps == 100
    acc = outcome.trace.final_accuracy
    outcome.check(
        Limit("forward_passes", low=400, high=400, units="count"),
        Limit("final_accuracy", low=0.0, marginal_low=acc + 0.01, units="fraction"),
    )

def test_limits_fail_with_value_limit_and_trace(zo_session):
    outcome = zo_session(budget=200, scheduler="fixed:2", seed=4)
    outcome.check(Limit("final_accuracy", low=0.999, units="fraction"))
"""


def test_zo_session_limits_go_to_junit_and_fail_clearly(pytester, tmp_path: Path) -> None:
    pytester.makepyfile(LIMITS_SAMPLE)
    junit = tmp_path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "--trace-dir", str(tmp_path / "traces"), "--junitxml", str(junit), "-W", "default"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*limit failed:*",
            "*FAIL: final_accuracy = * fraction, limit x >= 0.999 fraction (trace *"
            "test_limits_fail_with_value_limit_and_trace.h5, run 0000)*",
            "*test_zo_session_limits_go_to_junit_and_fail_clearly.py:*: MarginalWarning: "
            "MARGINAL: final_accuracy = *fraction, limit x >= 0 fraction (marginal below *)*",
        ]
    )
    xml = junit.read_text()
    assert 'name="hilbench.replay" value="match"' in xml
    assert 'name="hilbench.limit.forward_passes" value="PASS"' in xml
    assert 'name="hilbench.limit.forward_passes.value" value="400.0"' in xml
    assert 'name="hilbench.limit.final_accuracy" value="MARGINAL"' in xml
    assert 'name="hilbench.limit.final_accuracy" value="FAIL"' in xml
    assert 'name="hilbench.limit.final_accuracy.limit" value="x &gt;= 0.999 fraction"' in xml


REPLAY_MISMATCH = """
import hilbench.trace.replay as rp

def test_a_trace_that_does_not_replay_fails_the_test(zo_session, monkeypatch):
    real = rp.replay
    def off_by_one(trace, **kw):
        r = real(trace, **kw)
        return rp.ReplayResult(r.path, r.run_id, r.steps, r.weights_crc ^ 1, r.recorded_crc)
    monkeypatch.setattr(rp, "replay", off_by_one)
    zo_session(budget=100, scheduler="fixed:2")
"""


def test_zo_session_fails_a_test_whose_trace_does_not_replay(pytester, tmp_path: Path) -> None:
    pytester.makepyfile(REPLAY_MISMATCH)
    result = pytester.runpytest_subprocess("--trace-dir", str(tmp_path / "traces"))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*hilbench: replay MISMATCH: 25 steps of *run 0000 rebuild weights CRC 0x* but the "
            "device reported 0x*"
        ]
    )


def test_watch_waits_for_a_run_that_is_being_set_up(tmp_path: Path) -> None:
    attrs = {
        "protocol_version": 1, "backend": "emulate", "device_id": "t", "firmware": "t",
        "model": "m", "model_hash": "h", "dataset": "d", "seed": 0,
    }  # fmt: skip
    path = tmp_path / "soon.h5"
    with h5py.File(path, "w", libver=("v110", "v110")) as f:  # a trace with no run yet
        f.attrs["format"] = "hilbench-trace"
        f.attrs["format_version"] = 1
    watch = subprocess.Popen(
        [sys.executable, "-m", "hilbench", "watch", str(path), "--interval", "0.1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)
        with TraceWriter.create(path, attrs, {}) as w:
            w.append_step(0, 1, [1], [2], [3], [0.5], [1], 1.0, 1, 0, 1.0, 2, 1)
        out, err = watch.communicate(timeout=60)
    finally:
        if watch.poll() is None:
            watch.kill()
    assert watch.returncode == 0, err
    assert out.splitlines()[-1] == "run 0000 finished: complete"
