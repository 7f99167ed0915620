"""Every op against TFLM over random single-op models: every output byte must match.

Case counts per run (fixed seeds, so every CI run checks the same cases): see COUNTS; with
test_oracle_fc.py's 430 FULLY_CONNECTED cases that is > 1,000 single-op cases.
"""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.npu.ops import conv2d, jit

from .cases import CASES
from .oracle import graph_to_tflite, run_each, run_tflite
from .refimpl import conv_acc, mbqm

COUNTS = {
    "conv": 400,
    "depthwise": 300,
    "avg_pool": 150,
    "max_pool": 150,
    "mean": 150,
    "add": 150,
    "reshape": 50,
}
CHUNK = 50


def _describe(g) -> str:
    op = g.ops[-1]
    p = {k: v for k, v in op.params.items() if not isinstance(v, np.ndarray)}
    shapes = {n: t.shape for n, t in g.tensors.items()}
    return f"{op.kind} shapes={shapes} params={p}"


@pytest.mark.parametrize(
    ("name", "chunk"), [(n, i) for n, k in COUNTS.items() for i in range(-(-k // CHUNK))]
)
def test_random_single_op_models_bit_exact_with_tflm(name, chunk):
    rng = np.random.default_rng([sorted(CASES).index(name), chunk])
    n = min(CHUNK, COUNTS[name] - chunk * CHUNK)
    for case in range(n):
        g, x = CASES[name](rng)
        want = None
        for backend, got in run_each(g, x).items():
            if want is None:
                want = run_tflite(graph_to_tflite(g, x.shape[0]), x).reshape(got.shape)
            if not np.array_equal(got, want):
                bad = np.argwhere(got != want)[:3].tolist()
                pytest.fail(
                    f"{name} chunk {chunk} case {case} ({backend} backend): "
                    f"{int((got != want).sum())} of {got.size} bytes differ, e.g. at {bad}; "
                    f"{_describe(g)}"
                )


@pytest.mark.parametrize("name", ["conv", "depthwise"])
def test_batched_weight_sets_match_tflm_one_by_one(name):
    rng = np.random.default_rng(11)
    for _ in range(8):
        g, x = CASES[name](rng)
        w = g.tensors["w"].data
        sets = np.clip(w.astype(np.int16) + rng.integers(-3, 4, (4, *w.shape)), -127, 127)
        sets = sets.astype(np.int8)
        each = run_each(g, x, {"w": sets})
        for i in range(4):
            one = g.with_constants({"w": sets[i]})
            want = run_tflite(graph_to_tflite(one, x.shape[0]), x)
            for backend, got in each.items():
                assert got.shape == (4, x.shape[0], *g.output_shape), backend
                np.testing.assert_array_equal(got[i], want.reshape(got.shape[1:]), backend)


def test_float64_path_for_long_reductions():
    """K = 5*5*120 = 3000 with full-range data: partial sums exceed 2**24, so float64 is used,
    and the output still equals the int64 reference accumulators requantized in Python ints."""
    rng = np.random.default_rng(5)
    x = rng.integers(90, 128, (2, 7, 7, 120)).astype(np.int8)
    w = rng.integers(40, 128, (3, 5, 5, 120)).astype(np.int8)
    p = conv2d.prepare(0.02, -128, [1e-4], 50.0, 0, "NONE", in_hw=(7, 7), k_hw=(5, 5))
    p.update(multiplier=np.int32(2**30), shift=np.int32(-19))  # about acc / 2**20
    assert 3000 * 255 * 127 > 2**24
    got = conv2d.conv2d(x[None], w, None, p)[0]
    acc = conv_acc(x, w, None, -128, p)
    assert np.abs(acc).max() > 2**24
    want = np.vectorize(lambda a: min(max(mbqm(int(a), 2**30, -19), -128), 127))(acc)
    assert len(np.unique(want)) > 10
    np.testing.assert_array_equal(got, want)
    # the compiled path: 128 * (row L1 of the filter) > 2**24 forces float64 there too
    assert jit._Prepared(w, w.reshape(3, 1, -1).reshape(1, 3, -1)).dtype == np.float64
    np.testing.assert_array_equal(jit.conv2d(x[None], w, None, p)[0], want)
