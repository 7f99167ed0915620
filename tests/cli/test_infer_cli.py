"""``hilbench infer`` end to end in a subprocess, checked against TFLM on the same file."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.npu import zoo
from hilbench.npu.tflite import export_tflite
from tests.cli_helpers import hilbench
from tests.npu.oracle import run_tflite


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    g = zoo.build("resnet18", seed=0, width=0.125, resolution=24, classes=6)
    path = tmp_path_factory.mktemp("m") / "resnet.tflite"
    path.write_bytes(export_tflite(g, 1))
    return g, path


def _x(n, shape, seed=0):
    return np.random.default_rng(seed).integers(-128, 128, (n, *shape)).astype(np.int8)


def test_infer_writes_tflm_identical_outputs(model, tmp_path):
    g, path = model
    x = _x(7, g.input_shape)
    np.save(tmp_path / "x.npy", x)
    r = hilbench(
        "infer", str(path), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")
    )
    assert r.returncode == 0, r.stderr
    assert "7 outputs of shape (6,)" in r.stdout
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == np.int8 and y.shape == (7, 6)
    tflite = path.read_bytes()
    want = np.concatenate([run_tflite(tflite, x[i : i + 1]) for i in range(len(x))])
    np.testing.assert_array_equal(y, want)


def test_infer_accepts_batch_one_axis_and_prints(model, tmp_path):
    g, path = model
    x = _x(3, g.input_shape, seed=1)
    np.save(tmp_path / "x1.npy", x[:, None])
    r = hilbench(
        "infer",
        str(path),
        "--input",
        str(tmp_path / "x1.npy"),
        "--output",
        str(tmp_path / "y1.npy"),
    )
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "y1.npy")
    assert y.shape == (3, 1, 6)
    np.testing.assert_array_equal(y[:, 0], g.run(x))
    r = hilbench("infer", str(path), "--input", str(tmp_path / "x1.npy"))
    lines = r.stdout.strip().splitlines()
    assert r.returncode == 0 and len(lines) == 3
    assert [int(v) for v in lines[0].split()] == g.run(x)[0].tolist()


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (
            np.zeros((2, 24, 24, 3), np.float32),
            "holds float32 (2, 24, 24, 3), expected int8 of "
            "shape (N, 24, 24, 3) or (N, 1, 24, 24, 3)",
        ),
        (
            np.zeros((2, 24, 24), np.int8),
            "has shape (2, 24, 24), expected int8 of shape (N, 24, 24, 3)",
        ),
    ],
)
def test_wrong_input_says_what_was_expected(model, tmp_path, array, message):
    _, path = model
    np.save(tmp_path / "bad.npy", array)
    r = hilbench("infer", str(path), "--input", str(tmp_path / "bad.npy"))
    assert r.returncode == 2
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_bad_model_files_fail_in_one_line(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 4), np.int8))
    (tmp_path / "junk.tflite").write_bytes(b"\x1c\0\0\0TFL3" + b"\xff" * 40)
    for model, message in [
        (tmp_path / "missing.tflite", "cannot read"),
        (tmp_path / "x.npy", "not a .tflite file"),
        (tmp_path / "junk.tflite", "malformed .tflite file"),
    ]:
        r = hilbench("infer", str(model), "--input", str(tmp_path / "x.npy"))
        assert r.returncode == 2, r.stderr
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("backend", ["--sil"])
def test_infer_on_a_device_equals_tflm(model, tmp_path, backend):
    """The SIL firmware computes what TFLM computes, byte for byte (INFER, item by item)."""
    g, path = model
    x = _x(5, g.input_shape, seed=4)
    np.save(tmp_path / "x.npy", x)
    r = hilbench(
        "infer",
        str(path),
        "--input",
        str(tmp_path / "x.npy"),
        "-o",
        str(tmp_path / "y.npy"),
        backend,
    )
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "y.npy")
    tflite = path.read_bytes()
    want = np.concatenate([run_tflite(tflite, x[i : i + 1]) for i in range(len(x))])
    np.testing.assert_array_equal(y, want)
