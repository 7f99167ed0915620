"""Float backpropagation through the layers the vision models add to pre-training (depthwise
convolution, max pool), checked against central differences in float64."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.npu import nets
from hilbench.npu.floatnet import backward
from hilbench.npu.pretrain import softmax_xent_grad


@pytest.mark.parametrize(
    ("name", "arch", "kinds"),
    [
        ("mobilenet_v2", {"alpha": 0.35, "resolution": 16}, ("dwconv", "conv")),
        ("resnet18", {"width": 0.125, "resolution": 16}, ("conv",)),  # conv0 sits before maxpool
    ],
)
def test_gradients_match_central_differences(name, arch, kinds):
    model = nets.float_model(name, 0, **arch)
    for ly in model.weight_layers():
        ly.w = ly.w.astype(np.float64)
        ly.b = ly.b.astype(np.float64) + 0.01
    rng = np.random.default_rng(1)
    x = rng.random((3, *model.input_shape))
    y = np.array([1, 2, 3])
    env = model.forward(x)
    _, g = softmax_xent_grad(env["logits"].astype(np.float64), y)
    grads = backward(model, env, g.astype(np.float64))
    checked = set()
    for li, ly in enumerate(model.weight_layers()[:6]):
        for _ in range(2):
            idx = tuple(int(rng.integers(0, s)) for s in ly.w.shape)
            old = ly.w[idx]
            ly.w[idx] = old + 1e-5
            lp, _ = softmax_xent_grad(model.forward(x)["logits"], y)
            ly.w[idx] = old - 1e-5
            lm, _ = softmax_xent_grad(model.forward(x)["logits"], y)
            ly.w[idx] = old
            numeric = (lp - lm) / 2e-5
            assert abs(numeric - grads[li][0][idx]) <= 1e-6 + 1e-4 * abs(numeric), (ly.name, idx)
        checked.add(ly.kind)
    assert set(kinds) <= checked


def test_maxpool_sends_each_gradient_to_the_first_largest_input():
    from hilbench.npu.floatnet import FloatModel, Layer, _maxpool_backward

    ly = Layer("p", "maxpool", ["input"], "logits", kernel=2, stride=2, padding="VALID")
    x = np.array([[1.0, 5.0], [5.0, 2.0]]).reshape(1, 2, 2, 1)
    g = np.full((1, 1, 1, 1), 3.0)
    dx = _maxpool_backward(ly, x, g)
    assert dx.reshape(2, 2).tolist() == [[0.0, 3.0], [0.0, 0.0]]
    assert FloatModel("m", (2, 2, 1), [ly]).forward(x)["logits"].item() == 5.0
