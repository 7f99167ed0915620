"""Every bad ZO setting is one clear line from ``hilbench run`` (exit 2), before any device."""

import pytest

from tests.cli_helpers import hilbench


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--scheduler", "fixed:0"], ["fixed:0", "q in"]),
        (["--scheduler", "fixed:999"], ["fixed:999", "q in"]),
        (["--scheduler", "qscheduler:q_min=8,q_max=4"], ["q_min <= q_max"]),
        (["--scheduler", "qscheduler:speed=2"], ["bad setting 'speed=2'"]),
        (["--scheduler", "qscheduler:z_fall=-1"], ["z_fall=-1.0 is out of range", "[0, 10]"]),
        (["--scheduler", "adaptive"], ["unknown scheduler 'adaptive'", "qscheduler"]),
        (["--eps", "0"], ["eps 0 is out of range"]),
        (["--eps", "128"], ["eps 128 is out of range"]),
        (["--budget", "0"], ["budget 0 is out of range"]),
        (["--budget", "6", "--scheduler", "fixed:4"], ["less than one step", "--budget >= 8"]),
        (["--lr", "0"], ["learning rate 0.0 is out of range"]),
        (["--lr", "-3"], ["learning rate -3.0 is out of range"]),
        (["--lr", "1e9"], ["learning rate 1000000000.0 is out of range"]),
        (["--layers", "conv*"], ["'conv*' matches no trainable tensor", "fc0_w"]),
        (["--layers", "last:5"], ["last:5", "K must be in 1..2"]),
        (["--pool", "16"], ["pool of 16 is shorter than a row of tensor 1", "(tensor 1 is fc0_w)"]),
        (["--pool", "70000"], ["pool 70000 is out of range"]),
        (["--perturbation", "normal"], ["unknown perturbation 'normal'", "gaussian"]),
        (["--estimator", "three-point"], ["unknown estimator", "one-sided"]),
        (["--master", "fp32"], ["unknown master 'fp32'", "int16"]),
        (["--eps-mult", "fc0_w=40"], ["eps multiplier 'fc0_w=40'", "15.9"]),
        (["--eps-mult", "conv*=2"], ["'conv*' matches no trained tensor"]),
        (["--lr-schedule", "warmup"], ["unknown rate schedule 'warmup'", "cosine"]),
        (["--dataset", "digits-rot999"], ["unknown dataset 'digits-rot999'"]),
    ],
)
def test_bad_zo_settings_are_one_clear_line(tmp_path, args, needles):
    trace = tmp_path / "t.h5"
    proc = hilbench("run", *args, "--trace", str(trace), "--no-live")
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert not trace.exists()


def test_every_study_configuration_runs_alone_from_the_command_line(tmp_path):
    trace = tmp_path / "cnn.h5"
    proc = hilbench(
        "run",
        "--model",
        "cnn",
        "--dataset",
        "digits-rot20",
        "--init",
        "pretrained",
        "--scheduler",
        "qscheduler",
        "--perturbation",
        "uniform",
        "--pool",
        "256",
        "--budget",
        "60",
        "--no-live",
        "--trace",
        str(trace),
    )
    assert proc.returncode == 0, proc.stderr
    assert trace.exists()
