import numpy as np
import pytest

from hilbench.errors import ModelError
from hilbench.npu import zoo
from hilbench.npu.quant import dequantize, quantize


def test_build_mlp_validates_and_is_deterministic():
    a, b = zoo.build("mlp", seed=7), zoo.build_mlp(seed=7)
    a.validate()
    assert a.name == "mlp"
    for n, t in a.tensors.items():
        if t.data is not None:
            np.testing.assert_array_equal(t.data, b.tensors[n].data)
    c = zoo.build_mlp(seed=8)
    assert not np.array_equal(a.tensors["fc0_w"].data, c.tensors["fc0_w"].data)


def test_mlp_quantization_layout():
    g = zoo.build_mlp((64, 32, 16, 10), seed=0, logit_range=4.0)
    assert g.trainable() == ["fc0_w", "fc1_w", "fc2_w"]
    assert g.tensors["input"].qparams.zero_point[0] == -128
    lq = g.tensors["logits"].qparams
    assert lq.zero_point[0] == 0
    assert np.isclose(lq.scale[0], 4.0 / 127)
    for name in ("fc0_out", "fc1_out"):
        assert g.tensors[name].qparams.zero_point[0] == -128  # RELU output: min 0
    assert [op.params["activation"] for op in g.ops] == ["RELU", "RELU", "NONE"]
    w = g.tensors["fc0_w"]
    assert np.abs(w.data).max(axis=1).min() == 127  # each row uses the full range


def test_float_weights_and_int8_tracks_float():
    rng = np.random.default_rng(0)
    layers = [
        (
            rng.normal(0, 0.2, (32, 64)).astype(np.float32),
            rng.normal(0, 0.1, 32).astype(np.float32),
        ),
        (
            rng.normal(0, 0.2, (10, 32)).astype(np.float32),
            rng.normal(0, 0.1, 10).astype(np.float32),
        ),
    ]
    calib = rng.random((200, 64), dtype=np.float32)
    g = zoo.build_mlp(seed=0, float_weights=layers, calibration=calib)
    xq = quantize(calib, 1 / 255, -128)
    logits = dequantize(g.run(xq), g.tensors["logits"].qparams.scale[0], 0)
    ref = zoo.float_forward(layers, dequantize(xq, 1 / 255, -128))[-1]
    assert np.abs(logits - ref).max() < 0.25
    assert np.mean(logits.argmax(1) == ref.argmax(1)) > 0.9


def test_zero_row_guard():
    layers = [
        (np.zeros((32, 64), np.float32), np.zeros(32, np.float32)),
        (np.ones((10, 32), np.float32), np.zeros(10, np.float32)),
    ]
    g = zoo.build_mlp(seed=0, float_weights=layers)
    assert np.all(g.tensors["fc0_w"].qparams.scale > 0)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"sizes": (64,)}, "sizes"),
        ({"float_weights": [(np.zeros((3, 3)), np.zeros(3))]}, "float_weights"),
        ({"calibration": np.zeros((4, 63), np.float32)}, "calibration"),
        ({"logit_range": 0.0}, "logit_range"),
    ],
)
def test_build_mlp_rejects(kw, match):
    with pytest.raises(ModelError, match=match):
        zoo.build_mlp(seed=0, **kw)


def test_unknown_model_lists_known():
    with pytest.raises(ModelError, match="mlp"):
        zoo.build("resnet1000", seed=0)
