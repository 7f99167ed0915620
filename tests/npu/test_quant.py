import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hilbench.errors import ModelError
from hilbench.npu.quant import (
    INT32_MAX,
    INT32_MIN,
    activation_range,
    dequantize,
    multiply_by_quantized_multiplier,
    quantize,
    quantize_multiplier,
    round_half_away,
)

from .refimpl import mbqm


@pytest.mark.parametrize(
    ("real", "expected"),
    [
        (0.0, (0, 0)),
        (0.5, (1 << 30, 0)),
        (1.0, (1 << 30, 1)),
        (0.25, (1 << 30, -1)),
        (0.75, (3 << 29, 0)),
        (2.0**-31, (1 << 30, -30)),
        (2.0**-32, (1 << 30, -31)),
        (2.0**-33, (0, 0)),  # shift -32 < -31: flushed to zero
        (1.0 - 2.0**-40, (1 << 30, 1)),  # rounds to 2**31: the carry
        (0.1, (1717986918, -3)),
    ],
)
def test_quantize_multiplier_examples(real, expected):
    assert quantize_multiplier(real) == expected


@given(st.floats(min_value=1e-9, max_value=100.0))
def test_quantize_multiplier_reconstructs(real):
    m, s = quantize_multiplier(real)
    assert (1 << 30) <= m <= INT32_MAX
    assert math.isclose(m * 2.0 ** (s - 31), real, rel_tol=2**-30)


def test_quantize_multiplier_rejects_nan():
    with pytest.raises(ModelError):
        quantize_multiplier(float("nan"))


@pytest.mark.parametrize(
    ("x", "m", "s", "expected"),
    [
        (INT32_MIN, INT32_MIN, 0, INT32_MAX),  # the one saturating case
        (100, 1 << 30, 0, 50),
        (101, 1 << 30, 0, 51),  # 50.5 rounds away from zero
        (-101, 1 << 30, 0, -50),  # SRDHM nudge: -50.5 -> -50
        (-3, 1 << 30, -1, -1),  # -0.75 -> -1
        (-5, 1 << 30, 0, -2),  # SRDHM ties go toward +inf: -2.5 -> -2
        (-10, 1 << 30, -2, -1),  # SRDHM -5 exactly, then RDBPOT(-5, 2) = -1.25 -> -1
        (-6, 1 << 30, -1, -2),  # SRDHM -3, RDBPOT(-3, 1) = -1.5 -> -2 (away from zero)
        (7, 1 << 30, 2, 14),  # left shift
        (0, 1 << 30, -31, 0),
        (INT32_MAX, INT32_MAX, 0, INT32_MAX - 1),  # (2**31-1)**2 / 2**31 truncates
    ],
)
def test_mbqm_examples(x, m, s, expected):
    assert mbqm(x, m, s) == expected
    got = multiply_by_quantized_multiplier(np.array([x]), m, s)
    assert got.dtype == np.int32
    assert int(got[0]) == expected


def test_rounding_divide_by_pot_ties_away_from_zero():
    # multiplier 2**31-1 ~ 1.0; right shift 1: odd x -> half ties
    xs = np.array([5, -5, 3, -3, 1, -1], dtype=np.int64)
    got = multiply_by_quantized_multiplier(xs, 1 << 30, 0)  # x * 0.5
    assert list(got) == [3, -2, 2, -1, 1, 0]
    got = multiply_by_quantized_multiplier(xs * 2, 1 << 30, -1)  # 2x * 0.25 = x/2, in RDBPOT
    assert list(got) == [3, -3, 2, -2, 1, -1]


def test_mbqm_random_against_scalar_reference():
    rng = np.random.default_rng(0)
    n = 4000
    x = rng.integers(INT32_MIN, INT32_MAX, n, endpoint=True)
    x[:50] = INT32_MIN
    x[50:100] = INT32_MAX
    x[100:1000] = rng.integers(-70000, 70000, 900)
    m = rng.integers(0, INT32_MAX, n, endpoint=True)
    m[:25] = INT32_MIN  # outside QuantizeMultiplier's range, but the math must still agree
    s = rng.integers(-31, 8, n)
    got = multiply_by_quantized_multiplier(x, m, s)
    want = [mbqm(int(a), int(b), int(c)) for a, b, c in zip(x, m, s, strict=True)]
    np.testing.assert_array_equal(got, np.array(want, dtype=np.int64))


def test_mbqm_per_channel_broadcasts_on_last_axis():
    acc = np.arange(-60, 60, dtype=np.int64).reshape(2, 3, 20)
    m = np.arange(20) * 100_000_000 + 1
    s = np.arange(20) % 5 - 3
    got = multiply_by_quantized_multiplier(acc, m, s)
    assert got.shape == acc.shape
    for idx in np.ndindex(acc.shape):
        assert got[idx] == mbqm(int(acc[idx]), int(m[idx[-1]]), int(s[idx[-1]]))


@settings(max_examples=300)
@given(
    st.integers(INT32_MIN, INT32_MAX),
    st.integers(0, INT32_MAX),
    st.integers(-31, 6),
)
def test_mbqm_property(x, m, s):
    assert int(multiply_by_quantized_multiplier(np.array([x]), m, s)[0]) == mbqm(x, m, s)


@pytest.mark.parametrize(
    ("kind", "scale", "zp", "expected"),
    [
        ("NONE", 0.1, 3, (-128, 127)),
        ("RELU", 0.1, 5, (5, 127)),
        ("RELU", 0.1, -128, (-128, 127)),
        ("RELU6", 6 / 255, -128, (-128, 127)),
        ("RELU6", 0.05, -10, (-10, 110)),
        ("RELU6", 0.1, 100, (100, 127)),
        ("RELU6", 0.08, 0, (0, 75)),  # 6/0.08 = 75
        ("RELU6", 0.048, -128, (-128, -3)),  # 6/0.048 = 125
        ("RELU6", 0.0096, -128, (-128, 127)),  # 6/0.0096 = 625, clamped
    ],
)
def test_activation_range(kind, scale, zp, expected):
    assert activation_range(kind, scale, zp) == expected


def test_activation_range_uses_float32_division():
    rng = np.random.default_rng(1)
    for scale in rng.uniform(0.01, 0.2, 2000):
        hi = int(np.round(np.float32(6.0) / np.float32(scale)))  # no ties in practice
        assert activation_range("RELU6", float(scale), -128)[1] == min(127, -128 + hi)


def test_activation_range_unknown():
    with pytest.raises(ModelError, match="TANH"):
        activation_range("TANH", 0.1, 0)


def test_round_half_away():
    v = np.array([0.5, -0.5, 1.5, -1.5, 2.5, 0.49999997, -0.49999997], dtype=np.float32)
    np.testing.assert_array_equal(round_half_away(v), [1, -1, 2, -2, 3, 0, 0])


def test_quantize_and_dequantize():
    x = np.array([0.0, 0.5, -0.5, 1.0, 100.0, -100.0], dtype=np.float32)
    q = quantize(x, 0.5, -1)
    assert q.dtype == np.int8
    np.testing.assert_array_equal(q, [-1, 0, -2, 1, 127, -128])
    np.testing.assert_allclose(dequantize(q, 0.5, -1), [0.0, 0.5, -0.5, 1.0, 64.0, -63.5])
    q = quantize(np.array([0.25, 0.75], np.float32), 0.5, 0)  # 0.5 and 1.5: ties away
    np.testing.assert_array_equal(q, [1, 2])


def test_mbqm_ties_exhaustive_small():
    """Small accumulators with power-of-two multipliers hit every rounding tie."""
    x = np.arange(-300, 301, dtype=np.int64)
    for m in (1 << 30, (1 << 30) + 1, INT32_MAX, 3 << 29):
        for s in range(-10, 3):
            got = multiply_by_quantized_multiplier(x, m, s)
            np.testing.assert_array_equal(got, [mbqm(int(v), m, s) for v in x])
