"""A float .tflite quantized by hilbench's own quantizer: the same graph as quantizing the float
model directly, byte-exact on TFLM and the emulator; unsupported ops named, never half-read."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.errors import ModelError
from hilbench.npu import convert, nets, quantize_tflite
from hilbench.npu.tflite import export_tflite
from tests.needs import need_module
from tests.npu.oracle import assert_graph_matches_tflm

need_module("tflite_micro.tensorflow.lite.micro.compression.model_editor")

FLOAT_MODELS = [
    ("cnn", lambda rng: nets.cnn(rng, (8, 16), 10, 8)),
    ("mobilenet_v2", lambda rng: nets.mobilenet_v2(rng, 0.35, 32, 10)),
]


@pytest.mark.parametrize(("name", "make"), FLOAT_MODELS)
def test_float_tflite_quantizes_like_the_float_model_and_matches_tflm(name, make):
    fm = make(np.random.default_rng(0))
    data = quantize_tflite.export_float_tflite(fm)
    back = quantize_tflite.import_float_tflite(data)
    calib = np.random.default_rng(1).random((32, *fm.input_shape), dtype=np.float32)
    np.testing.assert_array_equal(back.forward(calib)["logits"], fm.forward(calib)["logits"])
    g = quantize_tflite.quantize_float_tflite(data, calib)
    scale, zero = convert.asym_qparams(float(calib.min()), float(calib.max()))
    direct = convert.quantize_model(
        fm, calib, input_scale=scale, input_zero_point=zero, logit_range=None
    )
    assert export_tflite(g) == export_tflite(direct)
    w = g.tensors[g.ops[0].inputs[1]]
    assert w.dtype == "int8" and len(w.qparams.scale) == w.shape[0]  # per-channel weights
    x = np.random.default_rng(2).integers(-128, 128, (4, *g.input_shape)).astype(np.int8)
    assert_graph_matches_tflm(g, x, "float-quantized")
    assert len(np.unique(g.run(x))) > 1


def test_an_int8_model_or_unsupported_ops_are_refused():
    fm = nets.cnn(np.random.default_rng(0), (8, 16), 10, 8)
    fm.layers[0].act = "RELU6"
    data = quantize_tflite.export_float_tflite(fm)
    int8 = export_tflite(
        quantize_tflite.quantize_float_tflite(data, np.random.default_rng(0).random((4, 8, 8, 1)))
    )
    with pytest.raises(ModelError, match="not float32"):
        quantize_tflite.import_float_tflite(int8, "q.tflite")
    tfl, _ = quantize_tflite.schema()
    model = tfl.ModelT.InitFromPackedBuf(data, 0)
    codes = model.operatorCodes
    for code in codes:
        if code.builtinCode == tfl.BuiltinOperator.RESHAPE:
            code.builtinCode = code.deprecatedBuiltinCode = tfl.BuiltinOperator.TANH
    import flatbuffers

    b = flatbuffers.Builder(0)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    with pytest.raises(ModelError, match=r"1 unsupported op: layer 2 \(TANH\)"):
        quantize_tflite.import_float_tflite(bytes(b.Output()), "f.tflite")


def test_the_quantize_command_calibrates_on_a_data_set(tmp_path, capsys):
    from hilbench import data as datasets
    from hilbench.cli.quantize import main
    from hilbench.npu.tflite import load_tflite

    fm = nets.cnn(np.random.default_rng(0), (8, 16), 10, 8)
    src, out = tmp_path / "f.tflite", tmp_path / "q.tflite"
    src.write_bytes(quantize_tflite.export_float_tflite(fm))
    assert main([str(src), "--data", "digits", "--items", "64", "-o", str(out)]) == 0
    assert "zero point" in capsys.readouterr().out
    g = load_tflite(out)
    calib = datasets.load("digits").x_train[:64]
    want = quantize_tflite.quantize_float_tflite(src.read_bytes(), calib)
    assert export_tflite(g) == export_tflite(want)
    assert (
        main(
            [
                str(src),
                "--calibration",
                str(tmp_path / "none.npy"),
                "-o",
                str(tmp_path / "q2.tflite"),
            ]
        )
        == 2
    )
    assert "cannot read" in capsys.readouterr().err
