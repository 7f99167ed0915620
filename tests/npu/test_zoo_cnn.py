"""The small digits CNN: layout, determinism, calibration shapes, batching, TFLM match."""

import numpy as np
import pytest

from hilbench.data import load, quantize_inputs
from hilbench.errors import ModelError
from hilbench.npu import blob, zoo

from .oracle import assert_graph_matches_tflm


@pytest.fixture(scope="module")
def digits():
    return load("digits")


@pytest.fixture(scope="module")
def cnn(digits):
    return zoo.build("cnn", seed=3, calibration=digits.x_train[:256])


def _x(digits, n=64):
    return quantize_inputs(digits.x_test[:n], 1 / 255, -128).reshape(n, 8, 8, 1)


def test_cnn_layout(cnn):
    assert cnn.input_shape == (8, 8, 1) and cnn.output_shape == (10,)
    assert [op.kind for op in cnn.ops] == ["CONV_2D", "CONV_2D", "RESHAPE", "FULLY_CONNECTED"]
    assert cnn.trainable() == ["conv0_w", "conv1_w", "fc3_w"]
    assert [cnn.tensors[n].shape for n in cnn.trainable()] == [
        (8, 3, 3, 1),
        (16, 3, 3, 8),
        (10, 256),
    ]
    assert cnn.num_parameters() == 3818
    assert cnn.tensors["conv0_out"].shape == (8, 8, 8)
    assert cnn.tensors["conv1_out"].shape == (4, 4, 16)
    assert cnn.tensors["conv0_out"].qparams.zero_point[0] == -128  # RELU: range starts at 0
    lq = cnn.tensors["logits"].qparams
    assert lq.zero_point[0] == 0 and np.isclose(lq.scale[0], 8.0 / 127)
    w = cnn.tensors["conv1_w"]
    assert w.qparams.axis == 0 and w.qparams.scale.shape == (16,)
    assert np.abs(w.data).reshape(16, -1).max(axis=1).min() == 127


def test_cnn_deterministic_and_calibration_shapes(digits, cnn):
    flat = digits.x_train[:256]
    for calib in (flat, flat.reshape(-1, 8, 8), flat.reshape(-1, 8, 8, 1)):
        g = zoo.build("cnn", seed=3, calibration=calib)
        for n, t in cnn.tensors.items():
            if t.data is not None:
                np.testing.assert_array_equal(t.data, g.tensors[n].data)
    other = zoo.build("cnn", seed=4, calibration=flat)
    assert not np.array_equal(other.tensors["conv0_w"].data, cnn.tensors["conv0_w"].data)
    with pytest.raises(ModelError, match="calibration"):
        zoo.build("cnn", seed=3, calibration=np.zeros((4, 63), np.float32))


def test_cnn_batched_weight_sets_equal_one_by_one(digits, cnn):
    rng = np.random.default_rng(0)
    x = _x(digits, 16)
    sets = {}
    for n in cnn.trainable():
        w = cnn.tensors[n].data.astype(np.int16)
        sets[n] = np.clip(w + rng.integers(-3, 4, (5, *w.shape)), -127, 127).astype(np.int8)
    got = cnn.run(x, sets)
    assert got.shape == (5, 16, 10)
    for i in range(5):
        one = cnn.with_constants({n: s[i] for n, s in sets.items()})
        np.testing.assert_array_equal(got[i], one.run(x))


def test_cnn_blob_round_trip(digits, cnn):
    g, _ = blob.from_blob(blob.to_blob(cnn))
    assert g.trainable() == cnn.trainable()
    np.testing.assert_array_equal(g.run(_x(digits)), cnn.run(_x(digits)))


def test_cnn_bit_exact_with_tflm(digits, cnn):
    assert_graph_matches_tflm(cnn, _x(digits, 128), "cnn")
