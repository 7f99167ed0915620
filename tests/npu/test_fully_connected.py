import numpy as np
import pytest

from hilbench.npu.ops.fully_connected import fully_connected, prepare

from .refimpl import fc_reference


def _random_case(rng, k, m, per_channel, relu):
    in_scale = float(rng.uniform(0.005, 0.05))
    in_zp = int(rng.integers(-128, 128))
    nch = m if per_channel else 1
    wscale = rng.uniform(0.001, 0.02, nch).astype(np.float32)
    out_scale = float(rng.uniform(0.01, 0.5))
    out_zp = int(rng.integers(-128, 128))
    act = ["NONE", "RELU", "RELU6"][relu]
    return prepare(in_scale, in_zp, wscale, out_scale, out_zp, act)


def _kw(p):
    return {
        k: p[k]
        for k in ("input_offset", "output_offset", "multiplier", "shift", "act_min", "act_max")
    }


@pytest.mark.parametrize("seed", range(12))
def test_fc_matches_integer_reference(seed):
    rng = np.random.default_rng(seed)
    s, n = int(rng.integers(1, 4)), int(rng.integers(1, 6))
    k = int(rng.choice([1, 7, 64, 518, 519, 700, 1500]))
    m = int(rng.integers(1, 12))
    p = _random_case(rng, k, m, seed % 2 == 0, seed % 3)
    x = rng.integers(-128, 128, (1 if seed % 4 == 0 else s, n, k)).astype(np.int8)
    batched_w = seed % 3 != 1
    w = rng.integers(-127, 128, ((s, m, k) if batched_w else (m, k))).astype(np.int8)
    bias = None
    if seed % 5 != 4:
        bias = rng.integers(-(2**20), 2**20, ((s, m) if seed % 2 else (m,))).astype(np.int32)
    y = fully_connected(x, w, bias, **_kw(p))
    s_out = max(
        x.shape[0],
        w.shape[0] if batched_w else 1,
        bias.shape[0] if bias is not None and bias.ndim == 2 else 1,
    )
    assert y.shape == (s_out, n, m)
    assert y.dtype == np.int8
    for i in range(s_out):
        xi = x[i if x.shape[0] > 1 else 0]
        wi = w[i] if batched_w else w
        bi = None if bias is None else (bias[i] if bias.ndim == 2 else bias)
        want = fc_reference(
            xi,
            wi,
            bi,
            p["input_offset"],
            p["output_offset"],
            p["multiplier"],
            p["shift"],
            p["act_min"],
            p["act_max"],
        )
        np.testing.assert_array_equal(y[i], want)


@pytest.mark.parametrize("k", [518, 519, 2000, 20000])
def test_fc_extreme_sums_are_exact(k):
    """Largest |x - zp| * |w| products: float32 would round partial sums above 2**24."""
    x = np.full((1, 2, k), 127, dtype=np.int8)
    x[0, 1, ::3] = -128
    w = np.full((3, k), 127, dtype=np.int8)
    w[1, ::2] = -127
    w[2, 1::7] = -128  # not a valid weight, but the kernel must still be exact
    # multiplier ~ 1/2**20 so the sums stay visible in the int8 output
    p = {
        "input_offset": 128,
        "output_offset": 0,
        "multiplier": np.array([1 << 30] * 3),
        "shift": np.array([-19] * 3),
        "act_min": -128,
        "act_max": 127,
    }
    acc = (x[0].astype(np.int64) + 128) @ w.astype(np.int64).T
    want = fc_reference(x[0], w, None, 128, 0, p["multiplier"], p["shift"], -128, 127)
    assert np.abs(acc).max() >= 255 * 127 * min(k, 518) // 2
    np.testing.assert_array_equal(fully_connected(x, w, None, **p)[0], want)


def test_fc_int32_accumulator_wraps_like_c():
    x = np.full((1, 1, 4), 127, dtype=np.int8)
    w = np.full((1, 4), 127, dtype=np.int8)
    bias = np.array([2**31 - 1000], dtype=np.int32)  # acc + bias overflows int32
    kw = {
        "input_offset": 128,
        "output_offset": 0,
        "multiplier": 1 << 30,
        "shift": -24,
        "act_min": -128,
        "act_max": 127,
    }
    want = fc_reference(x[0], w, bias, 128, 0, 1 << 30, -24, -128, 127)
    np.testing.assert_array_equal(fully_connected(x, w, bias, **kw)[0], want)
    assert want[0, 0] < 0  # wrapped to a large negative value


def test_fc_empty_batch():
    p = {
        "input_offset": 0,
        "output_offset": 0,
        "multiplier": 1 << 30,
        "shift": 0,
        "act_min": -128,
        "act_max": 127,
    }
    y = fully_connected(np.zeros((1, 0, 5), np.int8), np.zeros((3, 5), np.int8), None, **p)
    assert y.shape == (1, 0, 3)
