"""Bit-exactness of our int8 FULLY_CONNECTED and whole graphs against TFLM (tflite-micro)."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.npu import zoo
from hilbench.npu.graph import Graph, Op, QParams, Tensor
from hilbench.npu.ops import fully_connected as fc
from hilbench.npu.quant import ACTIVATIONS, quantize_multiplier

from .oracle import graph_to_tflite, run_each, run_tflite
from .refimpl import mbqm

CASES_PER_SEED = 40
SEEDS = range(10)  # 400 random single-op cases per run


def _fc_graph(x_q, w, w_scales, bias, out_q, act) -> Graph:
    """A single FC graph; ``bias`` None or int32 (M,); scales follow TFLite's rules."""
    in_s, in_zp = x_q
    out_s, out_zp = out_q
    m, k = w.shape
    w_scales = np.asarray(w_scales, np.float32)
    axis = 0 if w_scales.size > 1 else None
    zeros = np.zeros(w_scales.size, np.int32)
    t = {
        "x": Tensor("x", (k,), "int8", QParams([in_s], [in_zp])),
        "w": Tensor("w", (m, k), "int8", QParams(w_scales, zeros, axis), w),
        "y": Tensor("y", (m,), "int8", QParams([out_s], [out_zp])),
    }
    inputs = ["x", "w"]
    if bias is not None:
        bscale = (np.float32(in_s) * w_scales).astype(np.float32)
        t["b"] = Tensor("b", (m,), "int32", QParams(bscale, zeros, axis), bias)
        inputs.append("b")
    params = fc.prepare(in_s, in_zp, w_scales, out_s, out_zp, act)
    g = Graph(t, [Op(fc.KIND, inputs, ["y"], params)], "x", "y", "fc")
    g.validate()
    return g


def _random_case(rng: np.random.Generator) -> tuple[Graph, np.ndarray]:
    k = int(rng.choice([1, 2, 3, 8, 16, 33, 64, 100, 257, 518, 519, 1024, 2000]))
    m = int(rng.integers(1, 33))
    n = int(rng.integers(1, 9))
    in_s = float(np.float32(10 ** rng.uniform(-3, 0)))
    in_zp = int(rng.integers(-128, 128))
    per_channel = rng.random() < 0.6 and m > 1
    w_scales = (10 ** rng.uniform(-4, -1, m if per_channel else 1)).astype(np.float32)
    style = rng.integers(0, 4)
    if style == 0:  # uniform full range
        w = rng.integers(-127, 128, (m, k))
    elif style == 1:  # small, like trained nets
        w = np.clip(np.round(rng.normal(0, 20, (m, k))), -127, 127)
    elif style == 2:  # sparse
        w = rng.integers(-127, 128, (m, k)) * (rng.random((m, k)) < 0.1)
    else:  # extremes
        w = rng.choice([-127, 127], (m, k))
    w = w.astype(np.int8)
    if rng.random() < 0.5:
        x = rng.integers(-128, 128, (n, k))
    else:
        x = np.clip(np.round(rng.normal(in_zp, 10, (n, k))), -128, 127)
    x = x.astype(np.int8)
    acc = (x.astype(np.int64) - in_zp) @ w.astype(np.int64).T
    spread = float(np.std(acc)) + float(np.abs(acc).mean()) + 1.0
    bias = None
    if rng.random() < 0.75:
        lim = spread * (3 if rng.random() < 0.8 else 300)
        bias = rng.integers(-int(lim), int(lim) + 1, m).astype(np.int32)
        acc = acc + bias
    real_max = float(np.abs(acc * (in_s * w_scales.astype(np.float64))).max()) + 1e-6
    act = str(rng.choice(ACTIVATIONS))
    if rng.random() < 0.1:  # multiplier > 1: positive (left) shift
        out_s = float(np.float32(in_s * float(w_scales.max()) / rng.uniform(1.0, 8.0)))
    elif act == "RELU6":  # real values around 6, and 6 / out_s inside the int8 range
        w_scales = (w_scales * (rng.uniform(4, 15) / real_max)).astype(np.float32)
        out_s = float(np.float32(rng.uniform(6 / 250, 6 / 60)))
    else:
        out_s = float(np.float32(real_max / rng.uniform(60, 250)))
    # mostly centred outputs (few saturate), sometimes any zero point
    out_zp = int(rng.integers(-128, 128)) if rng.random() < 0.3 else int(rng.integers(-20, 21))
    if act != "NONE" and rng.random() < 0.7:
        out_zp = int(rng.integers(-128, -100))  # RELU outputs use the whole range
    return _fc_graph((in_s, in_zp), w, w_scales, bias, (out_s, out_zp), act), x


@pytest.mark.parametrize("seed", SEEDS)
def test_random_fc_bit_exact_with_tflm(seed):
    rng = np.random.default_rng(1000 + seed)
    for case in range(CASES_PER_SEED):
        g, x = _random_case(rng)
        want = run_tflite(graph_to_tflite(g, x.shape[0]), x)
        for backend, got in run_each(g, x).items():
            assert want.dtype == np.int8 and want.shape == got.shape
            if not np.array_equal(got, want):
                p = g.ops[0].params
                bad = np.argwhere(got != want)[:5].tolist()
                pytest.fail(
                    f"seed {seed} case {case} ({backend} backend): mismatch at {bad}; "
                    f"K={x.shape[1]} params={ {k: v for k, v in p.items()} }"
                )


def test_batched_weight_sets_match_tflm_one_by_one():
    rng = np.random.default_rng(7)
    for _ in range(10):
        g, x = _random_case(rng)
        w = g.tensors["w"].data
        sets = np.stack(
            [
                np.clip(w.astype(np.int16) + rng.integers(-2, 3, w.shape), -127, 127)
                for _ in range(3)
            ]
        ).astype(np.int8)
        each = run_each(g, x, {"w": sets})
        for i in range(3):
            want = run_tflite(graph_to_tflite(g.with_constants({"w": sets[i]}), x.shape[0]), x)
            for backend, got in each.items():
                assert got.shape == (3, *x.shape[:1], w.shape[0]), backend
                np.testing.assert_array_equal(got[i], want, backend)


def _single_rounding(x: int, m: int, s: int) -> int:
    """TFLITE_SINGLE_ROUNDING's MultiplyByQuantizedMultiplier, for the discrimination test."""
    total = 31 - s
    return (x * m + (1 << (total - 1))) >> total


def test_tflm_uses_double_rounding():
    """Bias-only accumulators where double and single rounding disagree: TFLM must give the
    double-rounding result (the pinned build is not compiled with TFLITE_SINGLE_ROUNDING)."""
    rng = np.random.default_rng(3)
    checked = 0
    while checked < 20:
        in_s = float(np.float32(rng.uniform(0.01, 0.1)))
        w_s = float(np.float32(rng.uniform(0.01, 0.1)))
        out_s = float(np.float32(in_s * w_s / rng.uniform(0.05, 0.5)))
        m, s = quantize_multiplier(in_s * w_s / out_s)
        accs = [
            a
            for a in range(-600, 600)
            if mbqm(a, m, s) != _single_rounding(a, m, s) and abs(mbqm(a, m, s)) < 120
        ]
        if not accs:
            continue
        bias = np.array(accs, np.int32)
        w = np.ones((len(accs), 1), np.int8)
        g = _fc_graph((in_s, 3), w, [w_s], bias, (out_s, 0), "NONE")
        x = np.full((1, 1), 3, np.int8)  # x - zp = 0: the accumulator is the bias
        want = run_tflite(graph_to_tflite(g, 1), x)[0]
        np.testing.assert_array_equal(want, [mbqm(a, m, s) for a in accs])
        for backend, got in run_each(g, x).items():
            np.testing.assert_array_equal(got[0], want, backend)
        checked += 1


@pytest.mark.parametrize(
    ("sizes", "seed", "calibrated"),
    [
        ((64, 32, 10), 0, False),
        ((64, 32, 10), 1, True),
        ((64, 128, 64, 10), 2, False),
        ((64, 10), 3, True),
    ],
)
def test_mlp_bit_exact_with_tflm(sizes, seed, calibrated):
    rng = np.random.default_rng(seed)
    calib = rng.random((100, sizes[0]), dtype=np.float32) if calibrated else None
    g = zoo.build_mlp(sizes, seed=seed, calibration=calib)
    x = rng.integers(-128, 128, (256, sizes[0])).astype(np.int8)
    want = run_tflite(graph_to_tflite(g, 256), x)
    for backend, got in run_each(g, x).items():
        np.testing.assert_array_equal(got, want, backend)
    # after some "training": weights and biases moved by a few LSB
    moved = {}
    for wn, bn in g.weight_tensors():
        w = g.tensors[wn].data.astype(np.int16)
        moved[wn] = np.clip(w + rng.integers(-4, 5, w.shape), -127, 127).astype(np.int8)
        b = g.tensors[bn].data.astype(np.int64)
        moved[bn] = (b + rng.integers(-500, 501, b.shape)).astype(np.int32)
    g2 = g.with_constants(moved)
    want = run_tflite(graph_to_tflite(g2, 256), x)
    for backend, got in run_each(g2, x).items():
        np.testing.assert_array_equal(got, want, backend)
