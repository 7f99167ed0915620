"""Host-side float pre-training: deterministic, and the quantized models classify digits."""

import numpy as np
import pytest

from hilbench.data import load, quantize_inputs
from hilbench.errors import ModelError
from hilbench.npu import floatnet, nets, pretrain, zoo


@pytest.fixture(scope="module")
def digits():
    return load("digits")


@pytest.mark.parametrize(("name", "min_acc"), [("mlp", 0.94), ("cnn", 0.95)])
def test_pretrained_int8_models_classify_digits(digits, name, min_acc):
    fw = pretrain.pretrain(name, digits.x_train, digits.y_train, seed=0)
    again = pretrain.pretrain(name, digits.x_train, digits.y_train, seed=0)
    for (w, b), (w2, b2) in zip(fw, again, strict=True):
        np.testing.assert_array_equal(w, w2)
        np.testing.assert_array_equal(b, b2)
    g = zoo.build(name, seed=0, calibration=digits.x_train[:256], float_weights=fw)
    x = quantize_inputs(digits.x_test, 1 / 255, -128).reshape(-1, *g.input_shape)
    acc = float(np.mean(g.run(x).argmax(1) == digits.y_test))
    assert acc >= min_acc
    untrained = zoo.build(name, seed=0, calibration=digits.x_train[:256])
    assert float(np.mean(untrained.run(x).argmax(1) == digits.y_test)) < 0.5


def test_adam_and_backward_reduce_the_loss(digits):
    model = nets.float_model("cnn", 1)
    x = digits.x_train[:128].reshape(-1, 8, 8, 1)
    losses = pretrain.train(
        model,
        x,
        digits.y_train[:128].astype(np.int64),
        rng=np.random.default_rng(1),
        epochs=5,
        lr=1e-2,
        batch_size=32,
    )
    assert losses[-1] < 0.5 * losses[0]


def test_conv_backward_matches_finite_differences():
    rng = np.random.default_rng(0)
    model = floatnet.FloatModel(
        "t",
        (5, 5, 2),
        [
            floatnet.Layer(
                "c",
                "conv",
                ["input"],
                "h",
                act="NONE",
                kernel=3,
                stride=2,
                w=rng.normal(0, 0.5, (3, 3, 3, 2)).astype(np.float32),
                b=rng.normal(0, 0.1, 3).astype(np.float32),
            ),
            floatnet.Layer("f", "flatten", ["h"], "hf"),
            floatnet.Layer(
                "o",
                "fc",
                ["hf"],
                "logits",
                w=rng.normal(0, 0.5, (4, 27)).astype(np.float32),
                b=np.zeros(4, np.float32),
            ),
        ],
    )
    x = rng.normal(0, 1, (3, 5, 5, 2)).astype(np.float32)
    y = np.array([0, 1, 3])
    env = model.forward(x)
    _, g = pretrain.softmax_xent_grad(env["logits"], y)
    dw = floatnet.backward(model, env, g)[0][0]
    w = model.layers[0].w
    for idx in [(0, 0, 0, 0), (2, 1, 2, 1), (1, 2, 0, 1)]:
        old = w[idx]
        w[idx] = old + 1e-2
        lp = pretrain.softmax_xent_grad(model.forward(x)["logits"], y)[0]
        w[idx] = old - 1e-2
        lm = pretrain.softmax_xent_grad(model.forward(x)["logits"], y)[0]
        w[idx] = old
        assert abs((lp - lm) / 2e-2 - dw[idx]) < 2e-3


def test_pretrain_rejects_bad_input(digits):
    with pytest.raises(ModelError, match="mobilenet"):
        pretrain.pretrain("mobilenet_v2", digits.x_train, digits.y_train, seed=0)
    with pytest.raises(ModelError, match="do not fit"):
        pretrain.pretrain("cnn", digits.x_train[:, :60], digits.y_train, seed=0)
    with pytest.raises(ModelError, match="float_weights"):
        zoo.build("cnn", seed=0, float_weights=[(np.zeros((8, 3, 3, 1)), np.zeros(8))])


@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_build_is_uniform(name):
    kw = {"resolution": 32} if name in ("mobilenet_v2", "resnet18") else {}
    g = zoo.build(name, seed=0, calibration=None, float_weights=None, **kw)
    g.validate()
    assert g.output_shape == (10,) and g.trainable()
