"""The hybrid's exact head (hilbench/zo/head.py, docs/zo-math.md section 11): the integer
gradient against a float64 reference, its int32 bound, the stochastic update's mean, and the
twin's HEAD_GRAD against the math."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.config import RunConfig
from hilbench.device import ModelState
from hilbench.train.prepare import load_data, prepare_model
from hilbench.zo import head
from hilbench.zo.loss import LossTables


def _float_error(logits: np.ndarray, labels: np.ndarray, scale: float) -> np.ndarray:
    """p - onehot(y) of the real logits s l, in float64 (numpy's softmax, no tables)."""
    z = scale * logits.astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(labels)), labels] -= 1.0
    return p


@pytest.mark.parametrize("scale", [0.02, 0.063, 0.25])
def test_the_integer_gradient_is_the_float_gradient_within_the_stated_tolerance(scale):
    rng = np.random.default_rng(int(scale * 1000))
    n, m, k, offset = 64, 10, 32, 128
    logits = rng.integers(-128, 128, (n, m)).astype(np.int8)
    labels = rng.integers(0, m, n)
    x = rng.integers(-128, 128, (n, k)).astype(np.int8)
    tables = LossTables.for_scale(scale)
    g, b = head.gradient(x, logits, labels, offset, tables)
    e = _float_error(logits, labels, scale)
    xo = x.astype(np.float64) + offset
    g_ref, b_ref = (e.T @ xo) * 2**15, e.sum(axis=0) * 2**15
    # per item and class, |e_int - 2^15 e| <= 1 + m/2 Q15 LSBs: half an LSB from the rounded
    # division, the rest from EXP's rounding (each entry within 1/2 of 2^-16, S >= 2^16)
    tol = 1 + m / 2
    e_int = head.softmax_error(logits, labels, tables)
    assert np.abs(e_int - e * 2**15).max() <= tol
    bound = tol * np.abs(xo).sum(axis=0)  # (K,): summed over the items
    assert np.all(np.abs(g - g_ref) <= bound[None, :])
    assert np.all(np.abs(b - b_ref) <= tol * n)
    # the tolerance is far below the gradient itself (the check could fail)
    assert np.abs(g_ref).mean() > 20 * bound.mean() / n * np.sqrt(n)


def test_the_sums_fit_int32_at_the_largest_batch():
    """e_y = -2^15 (the label's logit far below the others) and x + offset = 255 everywhere:
    G = 256 * -2^15 * 255 = -2,139,095,040, inside int32."""
    n, m, k = 256, 10, 4
    logits = np.full((n, m), 127, np.int8)
    logits[:, 0] = -128
    labels = np.zeros(n, np.int64)
    x = np.full((n, k), 127, np.int8)
    tables = LossTables.for_scale(0.25)  # EXP[255] rounds to 0: p_y = 0
    g, b = head.gradient(x, logits, labels, 128, tables)
    assert g.dtype == np.int32 and int(g[0, 0]) == -256 * 2**15 * 255 == -2_139_095_040
    assert int(b[0]) == -(2**23)


def test_the_stochastic_update_moves_by_the_exact_step_on_average():
    """Over round seeds the rounded step's mean is G r / 2^39 (unbiased to 2^-16 LSB)."""
    m, k = 4, 8
    rng = np.random.default_rng(3)
    g = rng.integers(-(2**28), 2**28, (m, k)).astype(np.int32)
    bsum = rng.integers(-(2**20), 2**20, m).astype(np.int32)
    rates = np.array([3000, 9000, 27000, 81000], np.int32)
    w = np.zeros((m, k), np.int8)
    b = np.zeros(m, np.int32)
    exact_w = g.astype(np.float64) * rates[:, None] / 2.0**39
    exact_b = bsum.astype(np.float64) * rates * 2.0**16 / 2.0**39
    steps_w, steps_b = [], []
    for seed in range(400):
        w2, b2 = head.update(w, b, g, bsum, rates, 16, seed)
        steps_w.append(-w2.astype(np.float64))
        steps_b.append(-b2.astype(np.float64))
    mean_w, mean_b = np.mean(steps_w, axis=0), np.mean(steps_b, axis=0)
    # a Bernoulli's mean over 400 draws: within 4 sigma (sigma <= 0.5 / 20)
    assert np.abs(mean_w - exact_w).max() < 0.1
    assert np.abs(mean_b - exact_b).max() < 0.1
    assert np.abs(exact_w).max() > 1.0  # some steps are whole LSBs, some fractions
    one = head.update(w, b, g, bsum, rates, 16, 7)
    assert np.array_equal(one[0], head.update(w, b, g, bsum, rates, 16, 7)[0])  # deterministic


def test_the_twins_head_grad_is_the_math_and_lowers_the_batch_loss():
    config = RunConfig(hybrid="last", seed=2)
    data = load_data(config)
    model = prepare_model(config, data)
    state = ModelState.from_blob(model.blob)
    assert state.head_op()[:2] == ("fc1_w", "fc1_b")  # the ZOCF leaves the head out
    assert "fc1_w" not in state.trainable
    from hilbench.data import quantize_inputs

    x = quantize_inputs(data.x_train[:32], model.input_scale, model.input_zero_point)
    y = data.y_train[:32]
    s_in, s_w = head.scales(state.graph)
    rates = head.rates(2800.0, s_in, s_w, 32)
    w0 = state.graph.tensors["fc1_w"].data.copy()
    first = state.head_grad(x, y, rates, head.BIAS_GAIN, 11)
    acts = ModelState.from_blob(model.blob).graph.run_all(x)
    g, bsum = head.gradient(acts["fc0_out"], acts["logits"], y, 128, state.tables)
    w_ref, _ = head.update(
        w0, ModelState.from_blob(model.blob).graph.tensors["fc1_b"].data, g, bsum, rates, 16, 11
    )
    assert np.array_equal(state.graph.tensors["fc1_w"].data, w_ref)
    losses = [first] + [state.head_grad(x, y, rates, head.BIAS_GAIN, s) for s in range(40)]
    assert losses[-1] < 0.8 * losses[0]  # Q16 nats: the exact steps descend
    assert state.head_grads == 41 and state.updates_applied == 0
