"""The compiled (numba) backend: same bytes as the numpy reference path in the corners the
random oracle cases rarely reach, weight-cache invalidation, backend selection. (Every oracle
test in this directory already checks both backends against TFLM.)"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from hilbench.errors import ModelError
from hilbench.npu import zoo
from hilbench.npu.ops import backend, conv2d, depthwise_conv2d, jit

from .cases import CASES
from .oracle import run_each


def _same(g, x, ov=None):
    """Every backend variant (native VNNI and scalar, jit) equals the numpy path."""
    each = run_each(g, x, ov)
    for name, got in each.items():
        np.testing.assert_array_equal(got, each["numpy"], name)
    return each["jit"]


def test_in_place_weight_change_is_seen():
    """Prepared (float) weights are cached per op; writing into the weight array must not
    leave a stale copy in use."""
    g = zoo.build("cnn", seed=0)
    x = np.random.default_rng(0).integers(-128, 128, (5, 8, 8, 1)).astype(np.int8)
    with backend.use("jit"):
        before = g.run(x)
        w = g.tensors["conv0_w"].data
        w[0, 0, 0, 0] = 127 if w[0, 0, 0, 0] != 127 else -127
        after = g.run(x)
    with backend.use("numpy"):
        np.testing.assert_array_equal(after, g.run(x))
    assert not np.array_equal(before, after)


def test_graph_weights_stay_cached_across_batched_calls():
    g = zoo.build("cnn", seed=1)
    x = np.random.default_rng(1).integers(-128, 128, (3, 8, 8, 1)).astype(np.int8)
    w = g.tensors["conv1_w"].data
    sets = np.stack([w, -w, np.clip(w.astype(np.int16) + 1, -127, 127).astype(np.int8)])
    with backend.use("jit"):
        g.run(x)
        op = next(o for o in g.ops if o.inputs[1] == "conv1_w")
        first = op._kernel_cache["weights"][0]
        g.run(x, {"conv1_w": sets})
        g.run(x)
        assert any(p is first for p in op._kernel_cache["weights"])
    _same(g, x, {"conv1_w": sets})


def test_batched_biases_alone_and_broadcasts():
    """Only biases batched (S from the bias), only weights batched, both, for conv,
    depthwise and FC: the jit path broadcasts S exactly like the numpy path."""
    rng = np.random.default_rng(4)
    g = zoo.build("mobilenet_v2", seed=0, alpha=0.35, resolution=32, classes=5)
    x = rng.integers(-128, 128, (2, 32, 32, 3)).astype(np.int8)
    pairs = g.weight_tensors()
    kinds = {op.inputs[1]: op.kind for op in g.ops if len(op.inputs) > 1}
    picked = {}
    for kind in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        picked[kind] = next((w, b) for w, b in pairs if kinds[w] == kind)
    for w_name, b_name in picked.values():
        b = g.tensors[b_name].data.astype(np.int64)
        biases = (b + rng.integers(-2000, 2001, (3, *b.shape))).astype(np.int32)
        w = g.tensors[w_name].data
        ws = np.clip(w.astype(np.int16) + rng.integers(-2, 3, (3, *w.shape)), -127, 127)
        for ov in ({b_name: biases}, {w_name: ws.astype(np.int8)}):
            assert _same(g, x, ov).shape == (3, 2, 5)
        _same(g, x, {b_name: biases, w_name: ws.astype(np.int8)})


def test_accumulator_wraps_like_int32():
    """acc + bias beyond int32 wraps (the C accumulator is int32), on both paths."""
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, (1, 1, 5, 5, 4)).astype(np.int8)
    w = rng.integers(-127, 128, (3, 3, 3, 4)).astype(np.int8)
    bias = np.array([2**31 - 1, -(2**31), 2**31 - 5000], np.int32)
    p = conv2d.prepare(0.05, 3, [0.01, 0.02, 0.03], 0.02, -5, "NONE", in_hw=(5, 5), k_hw=(3, 3))
    want = conv2d.conv2d(x, w, bias, p)
    np.testing.assert_array_equal(jit.conv2d(x, w, bias, p), want)
    dw = rng.integers(-127, 128, (1, 3, 3, 4)).astype(np.int8)
    b4 = np.array([2**31 - 1, -(2**31), 2**31 - 9, 7], np.int32)
    pd = depthwise_conv2d.prepare(0.05, 3, [0.01] * 4, 0.02, -5, "RELU", in_hw=(5, 5), k_hw=(3, 3))
    np.testing.assert_array_equal(
        jit.depthwise_conv2d(x, dw, b4, pd), depthwise_conv2d.depthwise_conv2d(x, dw, b4, pd)
    )


def test_random_ops_with_many_weight_sets_and_samples():
    rng = np.random.default_rng(9)
    for name in ("conv", "depthwise", "add", "max_pool", "mean"):
        for _ in range(6):
            g, x = CASES[name](rng)
            _same(g, x)
            if "w" in g.tensors:
                w = g.tensors["w"].data
                sets = rng.integers(-127, 128, (5, *w.shape)).astype(np.int8)
                _same(g, x, {"w": sets})


def test_backend_selection():
    assert backend.name() in backend.NAMES
    with backend.use("numpy"):
        assert backend.kernels() is None
        with backend.use("jit"):
            assert backend.kernels() is jit
        assert backend.name() == "numpy"
    with pytest.raises(ModelError, match="unknown NPU backend 'gpu'"):
        backend.select("gpu")


@pytest.mark.parametrize("value", list(backend.NAMES))
def test_backend_from_environment(value):
    code = "from hilbench.npu.ops import backend; print(backend.name())"
    env = {**os.environ, "HILBENCH_NPU_BACKEND": value}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == value
