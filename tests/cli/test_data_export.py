"""``hilbench data export``: the split quantized with the model's own input parameters."""

from __future__ import annotations

import json

import numpy as np

from hilbench import data as datasets
from hilbench.cli.data import main
from hilbench.npu import zoo
from hilbench.npu.tflite import export_tflite


def test_export_writes_the_test_split_quantized_for_the_model(tmp_path, capsys):
    data = datasets.load("digits")
    g = zoo.build("cnn", seed=0, calibration=data.x_train[:64].reshape(-1, 8, 8, 1))
    model = tmp_path / "cnn.tflite"
    model.write_bytes(export_tflite(g))
    out = tmp_path / "test"
    assert (
        main(["export", "digits", "--split", "test", "--model-file", str(model), "-o", str(out)])
        == 0
    )
    assert "digits test" in capsys.readouterr().out
    x, y = np.load(out / "x.npy"), np.load(out / "y.npy")
    meta = json.loads((out / "meta.json").read_text())
    q = g.tensors[g.input].qparams
    scale, zero = float(q.scale[0]), int(q.zero_point[0])
    assert (meta["input_scale"], meta["input_zero_point"]) == (scale, zero)
    assert x.dtype == np.int8 and x.shape == (len(data.y_test), 8, 8, 1)
    assert np.array_equal(y, data.y_test)
    back = (x.reshape(len(x), -1).astype(np.float64) - zero) * scale
    inside = (x.reshape(len(x), -1) > -128) & (x.reshape(len(x), -1) < 127)
    err = np.abs(back - data.x_test.reshape(len(x), -1))[inside]
    assert err.max() <= scale / 2 + 1e-6
    assert len(np.unique(x)) > 8  # not a constant: the inputs carry the digits


def test_a_model_whose_input_does_not_fit_is_refused(tmp_path, capsys):
    g = zoo.build("mobilenet_v2", seed=0, alpha=0.35, resolution=32)
    model = tmp_path / "mb.tflite"
    model.write_bytes(export_tflite(g))
    assert main(["export", "digits", "--model-file", str(model), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "the model takes (32, 32, 3)" in err and err.count("\n") == 1
    assert main(["export", "digits", "--split", "dev", "--model-file", str(model), "-o", "x"]) == 2
    assert "unknown split 'dev'" in capsys.readouterr().err
