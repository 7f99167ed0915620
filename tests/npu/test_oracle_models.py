"""Whole zoo models against TFLM, with per-layer comparison naming the first bad layer."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.data import load, quantize_inputs
from hilbench.npu import pretrain, zoo

from .oracle import (
    BACKENDS,
    assert_graph_matches_tflm,
    graph_to_tflite,
    run_each,
    run_tflite,
    run_tflite_all,
    use,
)


@pytest.fixture(scope="module")
def digits():
    return load("digits")


def _images(seed: int, n: int, res: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (n, res, res, 3)).astype(np.int8)


def _moved(g, rng, lsb: int = 3):
    out = {}
    for wn, bn in g.weight_tensors():
        w = g.tensors[wn].data.astype(np.int16)
        out[wn] = np.clip(w + rng.integers(-lsb, lsb + 1, w.shape), -127, 127).astype(np.int8)
        b = g.tensors[bn].data.astype(np.int64)
        out[bn] = (b + rng.integers(-300, 301, b.shape)).astype(np.int32)
    return out


def test_pretrained_cnn_and_its_perturbations_match_tflm(digits):
    fw = pretrain.pretrain("cnn", digits.x_train, digits.y_train, seed=1, epochs=3)
    g = zoo.build("cnn", seed=1, calibration=digits.x_train[:256], float_weights=fw)
    x = quantize_inputs(digits.x_test[:100], 1 / 255, -128).reshape(-1, 8, 8, 1)
    assert_graph_matches_tflm(g, x, "pretrained")
    rng = np.random.default_rng(2)
    sets = [_moved(g, rng) for _ in range(4)]
    each = run_each(g, x, {n: np.stack([s[n] for s in sets]) for n in sets[0]})
    for i, s in enumerate(sets):
        want = run_tflite(graph_to_tflite(g.with_constants(s), len(x)), x)
        for backend, batched in each.items():
            np.testing.assert_array_equal(batched[i], want, backend)


@pytest.mark.parametrize(
    ("name", "kw", "res"),
    [
        ("mobilenet_v2", {"alpha": 0.35, "resolution": 32}, 32),
        ("mobilenet_v2", {"alpha": 0.5, "resolution": 40, "classes": 7}, 40),
        ("resnet18", {"width": 0.25, "resolution": 32}, 32),
        ("resnet18", {"width": 0.125, "resolution": 48, "classes": 5}, 48),
    ],
)
def test_scaled_down_models_match_tflm_layer_by_layer(name, kw, res):
    g = zoo.build(name, seed=0, **kw)
    x = _images(1, 3, res)
    theirs = run_tflite_all(g, x)
    for backend in BACKENDS:
        with use(backend):
            ours = g.run_all(x)
        for op in g.ops:
            n = op.outputs[0]
            assert np.array_equal(ours[n], theirs[n]), f"{name} ({backend}): {op.kind} -> {n}"
    assert len(np.unique(ours["logits"])) > 5  # not a degenerate, saturated model
    moved = g.with_constants(_moved(g, np.random.default_rng(3), 2))
    assert_graph_matches_tflm(moved, x, "perturbed")


def test_a_mismatch_names_the_layer(digits):
    g = zoo.build("resnet18", seed=0, width=0.125, resolution=32)
    x = _images(2, 2, 32)
    broken = g.with_constants({})
    victim = next(op for op in broken.ops if op.kind == "ADD")
    victim.params["output_offset"] += 1  # our twin now differs from the .tflite TFLM runs
    with pytest.raises(pytest.fail.Exception, match=f"ADD -> {victim.outputs[0]}"):
        assert_graph_matches_tflm(broken, x, "broken", exported=g)
