"""Time limits and stopping rules: `hilbench run --time-limit / --until`, the run complete with
its reason in the trace and in `report`, replayed and exported; `--resume` with a new budget."""

import json
import signal
import subprocess
import sys
import time

import pytest

from hilbench.cli.run import expected_trace_bytes, trace_bytes_per_step
from hilbench.config import RunConfig, parse_duration, parse_scheduler, parse_until
from hilbench.errors import ConfigError, TraceError
from hilbench.trace import Trace
from hilbench.trace.replay import replay
from hilbench.train.stopping import Stopper
from tests.cli_helpers import ROOT, hilbench


def test_durations_and_rules_parse_to_numbers():
    assert parse_duration("30s") == 30 and parse_duration("1.5h") == 5400
    assert parse_duration("250ms") == 0.25 and parse_duration("2m") == 120
    assert parse_duration("45") == 45
    rules = parse_until("accuracy>=90%, loss<0.25")
    assert [(r.metric, r.op, r.value) for r in rules] == [
        ("accuracy", ">=", 0.9),
        ("loss", "<", 0.25),
    ]
    for bad in ("", "-3s", "soon", "31d"):
        with pytest.raises(ConfigError):
            parse_duration(bad)
    with pytest.raises(ConfigError, match="known metric"):
        RunConfig(until="acc>=0.9")


def test_a_stopper_stops_at_the_first_check_where_a_rule_holds():
    now = [0.0]
    stop = Stopper(10.0, "accuracy>=0.5,train_loss<=1", clock=lambda: now[0])
    assert stop.after_step(steps=1, forward_passes=8, train_loss=2.0) == ""
    assert stop.after_eval(forward_passes=8, accuracy=0.49, loss=1.5) == ""
    assert "accuracy 0.5 " in stop.after_eval(forward_passes=16, accuracy=0.5, loss=1.4)
    now[0] = 10.0
    assert stop.after_step(steps=3, forward_passes=24, train_loss=2.0).startswith(
        "time limit 10 s reached after 10.0 s (3 steps"
    )


def test_time_limit_ends_the_run_complete_and_it_replays_and_exports(tmp_path):
    path = tmp_path / "t.h5"
    started = time.monotonic()
    proc = hilbench(
        "run", "--budget", "100000000", "--time-limit", "2s", "--no-live", "--trace", str(path)
    )
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert "stopped by" in proc.stdout and "time limit 2 s reached" in proc.stdout
    assert took < 60
    trace = Trace.open(path)
    assert trace.status == "complete" and 0 < trace.forward_passes < 10**8
    assert trace.attrs["stop_reason"].startswith("time limit 2 s reached after 2.")
    assert trace.event_counts().get("stop") == 1
    assert replay(trace).matches
    report = json.loads(hilbench("report", str(path), "--json").stdout)
    assert report["stop_reason"] == trace.attrs["stop_reason"]
    assert "time limit 2 s" in hilbench("report", str(path)).stdout
    out = hilbench("export", str(path), "--output", str(tmp_path / "m.tflite"))
    assert out.returncode == 0 and (tmp_path / "m.tflite").stat().st_size > 1000


def test_until_stops_at_the_first_evaluation_that_meets_it_with_the_weights_of_that_point(
    tmp_path,
):
    until, whole = tmp_path / "until.h5", tmp_path / "whole.h5"
    args = ["--no-live", "--eval-every", "500", "--seed", "3"]
    proc = hilbench(
        "run", *args, "--budget", "1000000", "--until", "accuracy>=0.8", "--trace", str(until)
    )
    assert proc.returncode == 0, proc.stderr
    trace = Trace.open(until)
    tests = trace.evals[trace.evals["split"] == "test"]
    assert tests["accuracy"][-1] >= 0.8 and (tests["accuracy"][:-1] < 0.8).all()
    assert trace.attrs["stop_reason"].startswith("until accuracy>=0.8: accuracy 0.")
    # the same run given exactly that budget: the same steps and weights
    spent = trace.forward_passes
    assert hilbench("run", *args, "--budget", str(spent), "--trace", str(whole)).returncode == 0
    other = Trace.open(whole)
    assert other.attrs["stop_reason"] == "budget"
    assert other.weights_crc == trace.weights_crc and other.n_steps == trace.n_steps


def _steps_on_disk(path) -> int:
    try:
        return Trace.open(path).n_steps
    except (TraceError, OSError):
        return 0


def test_resume_may_set_a_new_budget_and_says_so(tmp_path):
    cut = tmp_path / "cut.h5"
    args = ["--budget", "400000", "--scheduler", "fixed:4", "--no-live", "--trace", str(cut)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "hilbench", "run", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while _steps_on_disk(cut) < 300 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    killed = Trace.open(cut)
    assert killed.status == "interrupted" and killed.forward_passes < 16000
    low = hilbench("run", "--resume", str(cut), "--budget", "100")
    assert low.returncode == 2 and "budget 100 is below the " in low.stderr
    assert "resuming with" not in low.stderr and "Traceback" not in low.stderr
    resumed = hilbench("run", "--resume", str(cut), "--budget", "16000", "--until", "loss<=0.01")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming with budget 16,000 forward passes (was 400,000)" in resumed.stderr
    assert "resuming with until loss<=0.01 (was no stopping rule)" in resumed.stderr
    done = Trace.open(cut)
    assert done.status == "complete" and done.forward_passes == 16000
    assert done.attrs["resumed_budget"] == 16000 and done.attrs["stop_reason"] == "budget"
    assert replay(done).matches
    # and it equals a run given 16,000 from the start
    whole = tmp_path / "whole.h5"
    assert hilbench("run", *args[:-1], str(whole), "--budget", "16000").returncode == 0
    # (the lr schedule is constant: the same steps; the budget only decides where it ends)
    assert Trace.open(whole).weights_crc == done.weights_crc


def test_bad_limits_are_one_line(tmp_path):
    for args, text in (
        (["--time-limit", "soon"], "time limit 'soon' is not a duration"),
        (["--until", "accuracy=>0.9"], "stopping rule 'accuracy=>0.9'"),
    ):
        proc = hilbench("run", "--no-live", "--trace", str(tmp_path / "x.h5"), *args)
        assert proc.returncode == 2 and text in proc.stderr
        assert "Traceback" not in proc.stderr


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs (root can mount one; elsewhere the test is skipped)."""
    where = tmp_path / "small"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("needs to mount a small tmpfs (root)")
    yield where
    subprocess.run(["umount", str(where)], check=False)


@pytest.mark.parametrize("q", [1, 4])
def test_the_trace_size_estimate_is_within_a_fifth_of_a_real_trace(tmp_path, q):
    sizes = []
    for budget in (1_200, 4_800):
        path = tmp_path / f"q{q}-{budget}.h5"
        proc = hilbench(
            "run",
            "--no-live",
            "--budget",
            str(budget),
            "--scheduler",
            f"fixed:{q}",
            "--trace",
            str(path),
        )
        assert proc.returncode == 0, proc.stderr
        sizes.append((path.stat().st_size, expected_trace_bytes(budget, q)))
    for real, guess in sizes:
        assert 0.8 < guess / real < 1.2, sizes
    # and the growth per forward pass, which is what a long run's size is made of
    (r1, g1), (r2, g2) = sizes
    assert 0.8 < (g2 - g1) / (r2 - r1) < 1.2, sizes


def test_a_long_run_is_told_its_trace_size_and_one_that_cannot_fit_is_refused(small_disk):
    path = small_disk / "long.h5"
    proc = hilbench("run", "--no-live", "--budget", "10000000", "--trace", str(path))
    assert proc.returncode == 2
    q = parse_scheduler(RunConfig().scheduler)[1]["q"]  # the default schedule's
    size = expected_trace_bytes(10_000_000, q)
    assert size > 4 << 20
    grows = f"grows to about {size / 2**20:,.1f} MiB"
    assert (
        f"the trace of 10,000,000 forward passes {grows} (~{trace_bytes_per_step(q):.0f} bytes "
        f"a step of {2 * q} forward passes); 4.0 MiB free" in proc.stderr
    )
    assert "it would fill the disk" in proc.stderr and "--time-limit" in proc.stderr
    assert not path.exists()
    # a time limit may end it sooner: said, and the run goes
    proc = hilbench(
        "run", "--no-live", "--budget", "10000000", "--time-limit", "1s", "--trace", str(path)
    )
    assert proc.returncode == 0, proc.stderr
    assert grows in proc.stderr and "would fill" not in proc.stderr
    assert Trace.open(path).attrs["stop_reason"].startswith("time limit 1 s")
