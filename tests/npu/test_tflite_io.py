""".tflite import/export: round trips, and one-line errors for models we cannot take."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.errors import ModelError
from hilbench.npu import zoo
from hilbench.npu.tflite import export_tflite, import_tflite, load_tflite
from tests.needs import need_module

me = need_module("tflite_micro.tensorflow.lite.micro.compression.model_editor")
tfl = need_module("tflite_micro.tensorflow.lite.micro.python.schema_py_generated")

MODELS = [
    ("mlp", {}),
    ("cnn", {}),
    ("mobilenet_v2", {"resolution": 32}),
    ("resnet18", {"resolution": 32, "width": 0.125}),
]


@pytest.mark.parametrize(("name", "kw"), MODELS)
def test_round_trip_is_identical(name, kw):
    g = zoo.build(name, seed=1, **kw)
    back = import_tflite(export_tflite(g, batch=1))
    assert back.trainable() == g.trainable()
    assert [o.kind for o in back.ops] == [o.kind for o in g.ops]
    for a, b in zip(back.ops, g.ops, strict=True):
        assert a.params.keys() == b.params.keys()
        for k in a.params:
            np.testing.assert_array_equal(a.params[k], b.params[k])
    x = np.random.default_rng(0).integers(-128, 128, (4, *g.input_shape)).astype(np.int8)
    np.testing.assert_array_equal(back.run(x), g.run(x))
    assert export_tflite(back, 1) == export_tflite(g, 1)


def _fc_model(dtype=tfl.TensorType.INT8, w_zp=0, extra_op=None, act_axis=False, bias_scale=None):
    """A hand-made one-FC .tflite (optionally broken in one way)."""
    model = me.Model()
    sg = model.add_subgraph(name="hand")
    q = (
        (lambda s, z: me.Quantization(s, z))
        if dtype == tfl.TensorType.INT8
        else (lambda s, z: None)
    )
    x = sg.add_tensor(
        shape=(1, 4),
        dtype=dtype,
        name="x",
        quantization=me.Quantization([0.1, 0.1], [0, 0], axis=1) if act_axis else q(0.1, 3),
    )
    wdata = np.arange(-6, 6, dtype=np.int8 if dtype == tfl.TensorType.INT8 else np.float32)
    w = sg.add_tensor(
        shape=(3, 4),
        dtype=dtype,
        name="dense/w",
        data=wdata.reshape(3, 4),
        quantization=q(0.02, w_zp),
    )
    b = sg.add_tensor(
        shape=(3,),
        dtype=tfl.TensorType.INT32,
        name="dense/b",
        data=np.array([1, 2, 3], "<i4"),
        quantization=me.Quantization(bias_scale or 0.1 * 0.02, 0),
    )
    y = sg.add_tensor(shape=(1, 3), dtype=dtype, name="dense/out", quantization=q(0.05, -2))
    op = sg.add_operator(opcode=tfl.BuiltinOperator.FULLY_CONNECTED, inputs=[x, w, b], outputs=[y])
    op._fb.builtinOptionsType = tfl.BuiltinOptions.FullyConnectedOptions
    op._fb.builtinOptions = tfl.FullyConnectedOptionsT()
    out = y
    if extra_op is not None:
        out = sg.add_tensor(shape=(1, 3), dtype=dtype, name="probs", quantization=q(1 / 256, -128))
        sg.add_operator(opcode=extra_op, inputs=[y], outputs=[out])
    sg.inputs, sg.outputs = [x], [out]
    return bytes(model.build())


def test_hand_made_model_imports():
    g = import_tflite(_fc_model())
    assert g.trainable() == ["dense/w"] and g.output_shape == (3,)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (
            {"dtype": tfl.TensorType.FLOAT32},
            "layer 0 (FULLY_CONNECTED -> 'dense/out'): tensor 'x' is FLOAT32 (a float model)",
        ),
        (
            {"extra_op": tfl.BuiltinOperator.SOFTMAX},
            "layer 1 (SOFTMAX -> 'probs'): unsupported op SOFTMAX",
        ),
        ({"w_zp": 5}, "weights dense/w: must be symmetric (zero point 0)"),
        ({"act_axis": True}, "must be per-tensor quantized"),
        ({"bias_scale": 0.5}, "bias dense/b scale must equal input_scale * weight_scale"),
    ],
)
def test_models_we_cannot_take_name_op_layer_and_rule(kw, message):
    with pytest.raises(ModelError) as e:
        import_tflite(_fc_model(**kw), "m.tflite")
    assert message in str(e.value)
    assert str(e.value).startswith("m.tflite: ") and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a .tflite file"),
        (b"\x10\0\0\0TFL3" + b"\x00" * 8, "malformed"),
        (b"\x10\0\0\0TFL3" + bytes(range(256)) * 4, "malformed"),
    ],
)
def test_malformed_files(data, message):
    with pytest.raises(ModelError, match=message):
        import_tflite(data)


def test_truncated_export_is_refused():
    data = export_tflite(zoo.build("cnn", seed=0), 1)
    for cut in (len(data) // 3, len(data) // 2, len(data) - 7):
        with pytest.raises(ModelError):
            import_tflite(data[:cut])


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match="cannot read"):
        load_tflite(tmp_path / "nope.tflite")


def test_every_unsupported_op_is_named_before_anything_is_read():
    model = me.Model()
    sg = model.add_subgraph(name="two unsupported")
    q = lambda s, z: me.Quantization(s, z)  # noqa: E731
    x = sg.add_tensor(shape=(1, 4), dtype=tfl.TensorType.INT8, name="x", quantization=q(0.1, 0))
    a = sg.add_tensor(shape=(1, 4), dtype=tfl.TensorType.INT8, name="a", quantization=q(0.1, 0))
    b = sg.add_tensor(shape=(1, 4), dtype=tfl.TensorType.INT8, name="b", quantization=q(0.1, 0))
    c = sg.add_tensor(shape=(1, 4), dtype=tfl.TensorType.INT8, name="c", quantization=q(0.1, 0))
    sg.add_operator(opcode=tfl.BuiltinOperator.TANH, inputs=[x], outputs=[a])
    sg.add_operator(opcode=tfl.BuiltinOperator.RESHAPE, inputs=[a], outputs=[b])
    sg.add_operator(opcode=tfl.BuiltinOperator.LOGISTIC, inputs=[b], outputs=[c])
    sg.inputs, sg.outputs = [x], [c]
    with pytest.raises(ModelError) as e:
        import_tflite(bytes(model.build()), "m.tflite")
    text = str(e.value)
    assert "2 unsupported ops of 3: layer 0 (TANH -> 'a'), layer 2 (LOGISTIC -> 'c')" in text
