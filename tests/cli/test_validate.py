"""``hilbench validate``: a device against TFLM, byte for byte, with ST's metrics."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from hilbench import data as datasets
from hilbench import validate
from hilbench.cli.validate import main
from hilbench.npu import zoo
from hilbench.npu.graph import Graph
from hilbench.npu.tflite import export_tflite
from tests.needs import need_module

need_module("tflite_micro.python.tflite_micro.runtime")


@pytest.fixture(scope="module")
def digits_cnn(tmp_path_factory):
    data = datasets.load("digits")
    g = zoo.build("cnn", seed=0, calibration=data.x_train[:64].reshape(-1, 8, 8, 1))
    path = tmp_path_factory.mktemp("m") / "cnn.tflite"
    path.write_bytes(export_tflite(g))
    return g, path


def test_validate_on_a_data_set_is_bit_exact_with_accuracy(digits_cnn, capsys):
    g, path = digits_cnn
    assert main([str(path), "--data", "digits", "--items", "40", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["items"] == 40 and r["byte_equal"] == 40 and r["bit_exact"] and r["passed"]
    m = r["metrics"]
    assert (m["rmse"], m["mae"], m["l2r"], m["cos"], m["acc"]) == (0, 0, 0, 1, 1)
    y = datasets.load("digits").y_test[:40]
    x = datasets.quantize_inputs(
        datasets.load("digits").x_test[:40],
        float(g.tensors[g.input].qparams.scale[0]),
        int(g.tensors[g.input].qparams.zero_point[0]),
    ).reshape(40, 8, 8, 1)
    want = float(np.mean(np.argmax(g.run(x).reshape(40, -1), 1) == y))
    assert r["accuracy"]["device"] == pytest.approx(want)


def test_compare_counts_differences_and_computes_st_metrics():
    rng = np.random.default_rng(0)
    ref = rng.integers(-128, 127, (6, 10)).astype(np.int8)
    dev = ref.copy()
    dev[4, 3] += 1
    dev[1, [0, 1]] -= 2
    r = validate.compare(dev, ref, scale=0.5, zero_point=3)
    assert r.byte_equal == 4 and not r.bit_exact
    assert [it.index for it in r.worst] == [1, 4]  # L2 2*sqrt(2)*0.5 before 0.5
    assert r.worst[0].differing == 2 and r.worst[0].max_abs == 2
    err = (dev.astype(float) - ref) * 0.5
    assert r.metrics.rmse == pytest.approx(np.sqrt(np.mean(err**2)))
    assert r.metrics.mae == pytest.approx(np.mean(np.abs(err)))
    rq = (ref.astype(float) - 3) * 0.5
    assert r.metrics.l2r == pytest.approx(np.linalg.norm(err) / np.linalg.norm(rq))
    assert 0.99 < r.metrics.cos < 1.0
    assert r.within({"rmse": 1.0, "cos": 0.99}) and not r.within({"mae": 1e-3})


def test_the_pytest_helper_and_a_mismatch_message(digits_cnn):
    _, path = digits_cnn
    x = np.random.default_rng(1).integers(-128, 128, (5, 8, 8, 1)).astype(np.int8)
    assert validate.assert_device_matches(path.read_bytes(), x).byte_equal == 5
    ref = validate.tflm_outputs(path.read_bytes(), x)
    bad = ref.copy()
    bad[2, 0] ^= 1
    text = validate.format_text(validate.compare(bad, ref, scale=0.1, zero_point=0, model="m"))
    assert "byte-equal: 4 of 5  (NOT bit-exact)" in text and "worst: item 2" in text


def test_validate_on_the_sil_firmware(digits_cnn, capsys):
    _, path = digits_cnn
    assert main([str(path), "--sil", "--data", "digits", "--items", "6"]) == 0
    out = capsys.readouterr().out
    assert "on sil against TFLM" in out and "byte-equal: 6 of 6  (bit-exact)" in out


def test_bad_input_exits_2(digits_cnn, tmp_path, capsys):
    _, path = digits_cnn
    np.save(tmp_path / "x.npy", np.zeros((3, 8, 8, 1), np.float32))
    assert main([str(path), "--input", str(tmp_path / "x.npy")]) == 2
    assert "quantize them" in capsys.readouterr().err


def test_layers_are_compared_with_tflm_and_a_difference_is_located(digits_cnn, capsys):
    g, path = digits_cnn
    assert main([str(path), "--data", "digits", "--items", "4", "--layers"]) == 0
    out = capsys.readouterr().out
    assert "every intermediate tensor equals TFLM's" in out
    x = np.random.default_rng(3).integers(-128, 128, (3, 8, 8, 1)).astype(np.int8)
    diffs = validate.compare_layers(g, x)
    assert [d.kind for d in diffs] == [op.kind for op in g.ops]
    assert all(d.differing == 0 and d.size == 3 * np.prod(g.tensors[d.output].shape) for d in diffs)
    # the second conv's bias moved in the emulated graph only: its layer is named first
    name = g.ops[1].inputs[2]
    tensors = dict(g.tensors)
    tensors[name] = dataclasses.replace(g.tensors[name], data=g.tensors[name].data + 1000)
    moved = Graph(tensors, g.ops, g.input, g.output, g.name)
    text = validate.format_layers(validate.compare_layers(moved, x, reference=g))
    assert "first difference at layer 1 (CONV_2D -> 'conv1_out')" in text


def _pools_model(tmp_path):
    from hilbench.npu import convert
    from hilbench.npu.floatnet import FloatModel, Layer

    fm = FloatModel(
        "pools",
        (8, 8, 4),
        [
            Layer("p0", "avgpool", ["input"], "p0_out", kernel=2, stride=2),
            Layer("p1", "maxpool", ["p0_out"], "p1_out", kernel=2, padding="VALID"),
            Layer("f", "flatten", ["p1_out"], "logits"),
        ],
    )
    calib = np.random.default_rng(0).random((8, 8, 8, 4), dtype=np.float32)
    g = convert.quantize_model(fm, calib, logit_range=None)
    path = tmp_path / "pools.tflite"
    path.write_bytes(export_tflite(g))
    return g, path


@pytest.mark.parametrize("backend", ["emulate-twin", "sil"])
def test_a_model_without_weights_infers_on_a_device(tmp_path, backend):
    """No weight tensor, so no ZO state: a device still loads it and infers (issue 27)."""
    from hilbench.inference import infer_on_device

    g, path = _pools_model(tmp_path)
    assert [op.kind for op in g.ops] == ["AVERAGE_POOL_2D", "MAX_POOL_2D", "RESHAPE"]
    x = np.random.default_rng(1).integers(-128, 128, (4, 8, 8, 4)).astype(np.int8)
    y = infer_on_device(g, x, "emulate" if backend == "emulate-twin" else backend)
    want = validate.tflm_outputs(path.read_bytes(), x)
    np.testing.assert_array_equal(y.reshape(len(x), -1), want)
    assert len({row.tobytes() for row in want}) == len(x)
