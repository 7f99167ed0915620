"""`hilbench run --model mobilenet_v2|resnet18`: a vision model pre-trained on the Fashion-MNIST
source task (float, cached), quantized, fine-tuned head-only on the shifted task through the
CLI on the emulator; its trace replays; bad sizes are one line each."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from hilbench import session
from hilbench.config import RunConfig
from hilbench.data import pretrained, stl10
from hilbench.errors import ConfigError
from hilbench.npu import nets
from hilbench.trace import Trace
from tests.cli_helpers import ROOT

TINY = ["--model", "resnet18", "--width", "0.125", "--resolution", "8"]
TINY_ARCH = {"width": 0.125, "resolution": 8, "classes": 10}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A fresh cache for the module: the first run pre-trains, later ones read it."""
    return tmp_path_factory.mktemp("hilbench-cache")


def run_cli(cache, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HILBENCH_CACHE": str(cache), "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "hilbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )


def test_a_vision_model_fine_tunes_through_the_cli_and_its_trace_replays(cache, tmp_path):
    trace = tmp_path / "r18.h5"
    proc = run_cli(cache, "run", *TINY, "--budget", "80", "--no-live", "--trace", str(trace))
    assert proc.returncode == 0, proc.stderr
    assert "device time" in proc.stdout and "(modeled: m55@600MHz)" in proc.stdout
    tr = Trace.open(trace)
    cfg = tr.config
    assert (cfg["model"], cfg["dataset"], cfg["init"], cfg["layers"]) == (
        "resnet18",
        "fashion-mnist-shift",
        "pretrained",
        "last:1",
    )
    assert (cfg["width"], cfg["resolution"]) == (0.125, 8)
    assert tr.forward_passes == 80
    assert tr.attrs["weights_crc"] != tr.attrs["initial_weights_crc"]  # the head moved
    replayed = run_cli(cache, "replay", str(trace))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "replay OK" in replayed.stdout
    # the same command again: same pre-trained weights (from the cache), same run, same CRC
    again = tmp_path / "again.h5"
    proc = run_cli(cache, "run", *TINY, "--budget", "80", "--no-live", "--trace", str(again))
    assert proc.returncode == 0, proc.stderr
    assert Trace.open(again).attrs["weights_crc"] == tr.attrs["weights_crc"]


def test_pretraining_is_cached_deterministic_and_learns_the_source_task(cache, monkeypatch):
    monkeypatch.setenv("HILBENCH_CACHE", str(cache))
    first, source = pretrained.vision_weights("resnet18", TINY_ARCH)
    files = list((cache / "pretrained").glob("*.npz"))
    assert len(files) == 1
    second, _ = pretrained.vision_weights("resnet18", TINY_ARCH)
    for (w1, b1), (w2, b2) in zip(first, second, strict=True):
        np.testing.assert_array_equal(w1, w2)
        np.testing.assert_array_equal(b1, b2)
    model = nets.float_model("resnet18", 0, **TINY_ARCH)
    model.set_weights(first)
    acc = float((model.forward(source.x_test)["logits"].argmax(1) == source.y_test).mean())
    assert acc > 0.55, f"pre-trained accuracy on the clean test items {acc:.1%}"
    # another seed pre-trains another model
    other, _ = pretrained.vision_weights("resnet18", TINY_ARCH, seed=1)
    assert not np.array_equal(other[0][0], first[0][0])


def test_the_head_is_all_a_step_trains(cache, monkeypatch):
    monkeypatch.setenv("HILBENCH_CACHE", str(cache))
    cfg = RunConfig(
        model="resnet18",
        width=0.125,
        resolution=8,
        dataset="fashion-mnist-shift",
        init="pretrained",
        layers="last:1",
    )
    prepared = session.prepare_model(cfg, session.load_data(cfg))
    assert [t.name for t in prepared.trained] == ["fc30_w", "fc30_b"]
    assert prepared.graph.tensors["input"].shape == (8, 8, 3)


def test_a_user_stl10_folder_trains_a_vision_model(cache, tmp_path):
    rng = np.random.default_rng(3)
    for split, n in (("train", 48), ("test", 16)):
        x = rng.integers(0, 256, (n, 96, 96, 3), dtype=np.uint8)
        (tmp_path / f"{split}_X.bin").write_bytes(stl10.encode_images(x))
        (tmp_path / f"{split}_y.bin").write_bytes((np.arange(n) % 10 + 1).astype(np.uint8))
    trace = tmp_path / "stl.h5"
    proc = run_cli(
        cache,
        "run",
        "--model",
        "mobilenet_v2",
        "--width",
        "0.1",
        "--resolution",
        "16",
        "--dataset",
        f"stl10:{tmp_path}",
        "--init",
        "random",
        "--budget",
        "16",
        "--no-live",
        "--trace",
        str(trace),
    )
    assert proc.returncode == 0, proc.stderr
    assert Trace.open(trace).config["dataset"] == f"stl10:{tmp_path}"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "mlp", "--width", "0.5"], "--width / --resolution size a vision model"),
        (["--model", "resnet18", "--resolution", "4"], "resolution 4 is out of range"),
        (["--model", "resnet18", "--width", "9"], "width 9 is out of range"),
        (["--model", "mobilenet_v2", "--dataset", "digits"], "--dataset fashion-mnist-shift"),
        (["--model", "cnn", "--dataset", "fashion-mnist"], "train mobilenet_v2 or resnet18"),
        (["--model", "resnet18", "--dataset", "stl10:/nowhere"], "STL-10: /nowhere"),
    ],
)
def test_bad_vision_options_are_one_line(cache, tmp_path, args, needle):
    proc = run_cli(
        cache, "run", *args, "--budget", "8", "--no-live", "--trace", str(tmp_path / "t")
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "t").exists()


def test_config_refuses_sizes_for_the_digits_models():
    with pytest.raises(ConfigError, match="size a vision model"):
        RunConfig(model="cnn", resolution=16)
