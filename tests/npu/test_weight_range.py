"""Weight headroom: a random-init MLP's int8 weights use part of the range so they can grow."""

import numpy as np
import pytest

from hilbench import data as datasets
from hilbench.config import RunConfig
from hilbench.errors import ModelError
from hilbench.npu import zoo
from hilbench.train.prepare import RANDOM_INIT_WEIGHT_RANGE, build_graph


def test_weight_range_sets_each_rows_largest_weight_and_keeps_the_float_model():
    full, half = zoo.build_mlp(seed=3), zoo.build_mlp(seed=3, weight_range=64)
    for name in ("fc0_w", "fc1_w"):
        a, b = full.tensors[name], half.tensors[name]
        assert np.abs(a.data).max(axis=1).min() == 127
        assert np.abs(b.data).max(axis=1).tolist() == [64] * b.shape[0]
        # same float weights: the scale doubles (to float32 rounding) as the range halves
        np.testing.assert_allclose(b.qparams.scale, a.qparams.scale * 127 / 64, rtol=1e-6)
        deq = b.data * b.qparams.scale[:, None]
        ref = a.data * a.qparams.scale[:, None]
        assert np.abs(deq - ref).max() <= 0.5 * (a.qparams.scale + b.qparams.scale).max()
    for bad in (0, 128):
        with pytest.raises(ModelError):
            zoo.build_mlp(seed=3, weight_range=bad)


def test_random_init_mlp_gets_headroom_and_pretrained_weights_the_full_range():
    data = datasets.load("digits")
    g = build_graph(RunConfig(), data)
    assert RANDOM_INIT_WEIGHT_RANGE == 64
    assert np.abs(g.tensors["fc0_w"].data).max() == 64
    pre = build_graph(RunConfig(init="pretrained", dataset="digits-rot20"), data)
    assert np.abs(pre.tensors["fc0_w"].data).max(axis=1).min() == 127
