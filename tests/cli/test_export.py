"""``hilbench export TRACE -o trained.tflite``: the trained int8 model, which TFLM runs and
``hilbench infer`` reads, with the outputs the device computes (issue 14)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from hilbench import data as datasets
from hilbench import session
from hilbench.backend.emulate import EmulatorBackend
from hilbench.config import RunConfig
from hilbench.console import NullView
from hilbench.trace import Trace
from hilbench.trace.replay import replay_state
from tests.needs import need_module

ROOT = Path(__file__).resolve().parents[2]


def hilbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hilbench", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def train(path: Path, model: str, view=None, budget: int = 600) -> None:
    config = RunConfig(trace=path, live=False, model=model, budget=budget, seed=4)
    session.run(config, backend=EmulatorBackend(link="memory"), view=view)


def tflm_outputs(model: bytes, x: np.ndarray) -> np.ndarray:
    from tflite_micro.python.tflite_micro import runtime

    interpreter = runtime.Interpreter.from_bytes(model)
    out = []
    for item in x:
        interpreter.set_input(item[None], 0)
        interpreter.invoke()
        out.append(interpreter.get_output(0)[0].copy())
    return np.stack(out)


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_the_exported_model_runs_in_tflm_as_the_device_ran_it(tmp_path, model):
    need_module("tflite_micro")
    trace_path, out = tmp_path / "run.h5", tmp_path / "trained.tflite"
    train(trace_path, model)
    proc = hilbench("export", str(trace_path), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    trace = Trace.open(trace_path)
    graph = replay_state(trace).graph  # the device's final weights, rebuilt
    assert f"weights CRC 0x{trace.weights_crc:08x} as the device reported" in proc.stdout
    assert f"test accuracy {trace.final_accuracy:.2%}" in proc.stdout
    q = graph.tensors[graph.input].qparams
    scale, zero = float(q.scale[0]), int(q.zero_point[0])
    assert f"input  int8 ({', '.join(map(str, graph.input_shape))}): scale {scale:.9g}, " in (
        proc.stdout
    )
    assert f"zero point {zero}" in proc.stdout

    data = datasets.load("digits")
    x = datasets.quantize_inputs(data.x_test, scale, zero).reshape(-1, *graph.input_shape)
    tflm = tflm_outputs(out.read_bytes(), x)
    ours = graph.run(x)
    np.testing.assert_array_equal(tflm.reshape(ours.shape), ours)  # byte for byte
    accuracy = float(np.mean(tflm.reshape(len(x), -1).argmax(-1) == data.y_test))
    assert accuracy == trace.final_accuracy  # what the device measured at the end

    # hilbench infer reads it, and says how to quantize its inputs
    xs, ys = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(xs, x[:20])
    inferred = hilbench("infer", str(out), "-i", str(xs), "-o", str(ys))
    assert inferred.returncode == 0, inferred.stderr
    np.testing.assert_array_equal(np.load(ys).reshape(20, -1), tflm[:20].reshape(20, -1))
    assert f"scale {scale:.9g}, zero point {zero}" in inferred.stderr


def test_an_interrupted_run_exports_its_last_weights_and_says_so(tmp_path):
    class StopAfter(NullView):
        def update(self, progress) -> None:
            if progress.step >= 20:
                raise KeyboardInterrupt

    trace_path, out = tmp_path / "cut.h5", tmp_path / "cut.tflite"
    with pytest.raises(KeyboardInterrupt):
        train(trace_path, "mlp", view=StopAfter(), budget=4000)
    proc = hilbench("export", str(trace_path), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    steps = Trace.open(trace_path).n_steps
    assert proc.stderr.startswith(
        f"hilbench: note: run 0000 is interrupted: these are its weights after {steps} updates"
    )
    assert out.stat().st_size > 0


def test_a_trace_that_does_not_replay_exports_nothing(tmp_path):
    trace_path, out = tmp_path / "run.h5", tmp_path / "bad.tflite"
    train(trace_path, "mlp", budget=200)
    with h5py.File(trace_path, "r+") as f:  # one coefficient changed after the fact
        samples = f["runs/0000/samples"]
        row = samples[5]
        row["coeff"] += 40
        samples[5] = row
    proc = hilbench("export", str(trace_path), "-o", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "does not replay to the device's weights" in proc.stderr
    assert "hilbench replay" in proc.stderr
    assert not out.exists()
