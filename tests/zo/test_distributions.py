"""Distributions, scales, unit directions, integer deltas and the reuse pool."""

import math

import numpy as np
import pytest

from hilbench.zo import perturb as P
from hilbench.zo.rng import STREAM_PERTURB, STREAM_POOL, stream_words, stream_words_many

SEEDS = np.array([1, 2, 3, 0xFFFFFFFF], dtype=np.uint32)


def test_gaussian_is_a_centred_binomial_of_16_bits():
    words = stream_words(5, STREAM_PERTURB, 0, 50)
    r = P.samples_from_words(words, P.GAUSSIAN, 100)
    for i in range(100):
        half = (int(words[i // 2]) >> (16 * (i % 2))) & 0xFFFF
        assert r[i] == bin(half).count("1") - 8
    big = P.draw(np.array([7], np.uint32), 0, (200_000,), P.GAUSSIAN)[0].astype(float)
    assert big.min() >= -8 and big.max() <= 8
    assert abs(big.mean()) < 0.02 and abs(big.var() - 4.0) < 0.05
    assert P.words_needed(101, P.GAUSSIAN) == 51


def test_uniform_is_odd_and_symmetric_in_pm127():
    words = stream_words(9, STREAM_PERTURB, 3, 10)
    r = P.samples_from_words(words, P.UNIFORM, 40)
    for i in range(40):
        byte = (int(words[i // 4]) >> (8 * (i % 4))) & 0xFF
        assert r[i] == 2 * (byte & 0x7F) - 127
    big = P.draw(np.array([8], np.uint32), 0, (200_000,), P.UNIFORM)[0].astype(float)
    assert set(np.unique(big) % 2) == {1.0}
    assert big.min() == -127 and big.max() == 127
    assert abs(big.std() - P.UNIFORM_SIGMA) < 0.3


def test_rademacher_matches_the_v0_layout():
    r = P.draw(SEEDS, 2, (5, 7), P.RADEMACHER)
    for k, s in enumerate(SEEDS):
        np.testing.assert_array_equal(r[k].reshape(-1), P.rademacher(int(s), 2, 35))
    np.testing.assert_array_equal(P.directions(SEEDS, 2, (5, 7)), r)


@pytest.mark.parametrize("dist", [P.RADEMACHER, P.GAUSSIAN, P.UNIFORM])
def test_fixed_units_have_unit_rms_and_deltas_are_symmetric(dist):
    r = P.draw(SEEDS, 0, (64, 64), dist)
    u = P.units(r, P.scales(r, dist, P.FIXED))
    rms = np.sqrt((u.astype(float) ** 2).mean()) / P.ONE_UNIT
    assert abs(rms - 1) < 0.05
    for eps in (1, 2, 3, 7):
        d = P.deltas(u, eps, 16, 0)
        np.testing.assert_array_equal(P.deltas(-u, eps, 16, 0), -d)
    if dist == P.RADEMACHER:
        np.testing.assert_array_equal(P.deltas(u, 3, 16, 0), 3 * r)
    if dist == P.GAUSSIAN:
        np.testing.assert_array_equal(u, 128 * r.astype(int))
        np.testing.assert_array_equal(P.deltas(u, 2, 16, 0), r)


def test_adaptive_scale_is_the_integer_formula_and_normalises_rms():
    r = P.draw(SEEDS, 1, (33, 17), P.UNIFORM)
    s = P.scales(r, P.UNIFORM, P.ADAPTIVE)
    for k in range(len(SEEDS)):
        q = int((r[k].astype(np.int64) ** 2).sum())
        assert s[k] == math.isqrt((r[k].size << 32) // q)
    u = P.units(r, s)
    rms = np.sqrt((u.astype(float) ** 2).reshape(len(SEEDS), -1).mean(axis=1)) / 256
    np.testing.assert_allclose(rms, 1.0, atol=0.01)
    rad = P.draw(SEEDS, 1, (33, 17), P.RADEMACHER)
    assert set(P.scales(rad, P.RADEMACHER, P.ADAPTIVE)) == {65536}
    zero = np.zeros((1, 10), np.int8)
    assert P.scales(zero, P.GAUSSIAN, P.ADAPTIVE)[0] == P.SCALE_MAX


def test_isqrt_is_exact_around_squares():
    xs = np.array([0, 1, 2, 3, 4, 15, 16, 17, (1 << 62) - 1, (3037000499**2), 3037000499**2 - 1])
    np.testing.assert_array_equal(P.isqrt_u64(xs), [math.isqrt(int(x)) for x in xs])


def test_channel_multipliers_scale_rows_and_unit_shift_scales_units():
    r = P.draw(SEEDS[:1], 0, (3, 4), P.RADEMACHER)
    u = P.units(r, P.scales(r, P.RADEMACHER, P.FIXED))
    d = P.deltas(u, 2, P.row_mults(np.array([8, 16, 32]), (3, 4), P.ROWS_LEADING), 0)
    np.testing.assert_array_equal(d[0], r[0] * np.array([1, 2, 4])[:, None])
    # a depthwise filter's rows are its last axis: a multiplier per column of the flat view
    r = P.draw(SEEDS[:1], 0, (1, 2, 2, 3), P.RADEMACHER)
    u = P.units(r, P.scales(r, P.RADEMACHER, P.FIXED))
    m = P.row_mults(np.array([8, 16, 32]), (1, 2, 2, 3), P.ROWS_TRAILING)
    assert m.shape == (1, 1, 1, 3)
    d = P.deltas(u, 2, m, 0).reshape(4, 3)
    np.testing.assert_array_equal(d, r[0].reshape(4, 3) * np.array([1, 2, 4]))
    with pytest.raises(ValueError, match="row multipliers"):
        P.row_mults(np.array([8, 16]), (1, 2, 2, 3), P.ROWS_TRAILING)
    np.testing.assert_array_equal(P.deltas(u, 2, 16, 8), 512 * r.astype(np.int64))


def test_pool_is_generated_once_from_its_own_stream():
    pool = P.Pool.generate(seed=42, size=1000, distribution=P.UNIFORM)
    words = stream_words(42, STREAM_POOL, 0, 250)
    np.testing.assert_array_equal(pool.values, P.samples_from_words(words, P.UNIFORM, 1000))
    with pytest.raises(ValueError):
        P.Pool.generate(1, 0, P.UNIFORM)


def test_pool_rows_read_consecutive_entries_from_per_row_offsets():
    pool = P.Pool.generate(seed=3, size=97, distribution=P.UNIFORM)
    shape = (6, 40)
    r = P.draw(SEEDS, 5, shape, P.UNIFORM, pool)
    words = stream_words_many(SEEDS, STREAM_PERTURB, 5, 3)
    for k in range(len(SEEDS)):
        for j in range(6):
            h = (int(words[k, j // 2]) >> (16 * (j % 2))) & 0xFFFF
            o = (h * 97) >> 16
            expected = pool.values[(o + np.arange(40)) % 97]
            np.testing.assert_array_equal(r[k, j], expected)
    assert P.fresh_words(shape, P.UNIFORM, 97) == 3
    assert P.fresh_numbers(shape, 97) == 6 and P.fresh_numbers(shape) == 240
    # rows are output channels: axis 0 (a bias: one row per element), a depthwise filter's
    # last axis
    assert P.rows_of((10,)) == (10, 1) and P.rows_of((4, 3, 3, 2)) == (4, 18)
    assert P.rows_of((1, 3, 3, 24), P.ROWS_TRAILING) == (24, 9)
    assert P.fresh_numbers((1, 3, 3, 24), 16, P.ROWS_TRAILING) == 24
    assert P.fresh_words((1, 3, 3, 24), P.UNIFORM, 16, P.ROWS_TRAILING) == 12


def test_depthwise_pool_rows_run_along_the_last_axis():
    """Row j of a depthwise filter [1, KH, KW, R] is elements j, j + R, ...: entry i of the
    row is pool[(o_j + i) mod P], o_j from half-word j of the seed's stream."""
    pool = P.Pool.generate(seed=4, size=11, distribution=P.GAUSSIAN)
    shape = (1, 3, 3, 5)
    r = P.draw(SEEDS, 2, shape, P.GAUSSIAN, pool, P.ROWS_TRAILING)
    offsets = P.pool_offsets(SEEDS, 2, 5, 11)
    for k in range(len(SEEDS)):
        flat = r[k].reshape(9, 5)  # (entry i, row j)
        for j in range(5):
            np.testing.assert_array_equal(
                flat[:, j], pool.values[(offsets[k, j] + np.arange(9)) % 11]
            )
    # a bias (rank 1) has a row per element: one offset each
    b = P.draw(SEEDS, 3, (7,), P.GAUSSIAN, pool)
    np.testing.assert_array_equal(b, pool.values[P.pool_offsets(SEEDS, 3, 7, 11)])


def test_pool_perturbations_do_not_repeat_at_a_fixed_distance():
    """With one offset per tensor, element x and x + P are always equal; per-row offsets make
    the coincidence rate across rows about 1/P."""
    pool = P.Pool.generate(seed=1, size=64, distribution=P.UNIFORM)
    seeds = np.arange(400, dtype=np.uint32)
    r = P.draw(seeds, 0, (8, 64), P.UNIFORM, pool).reshape(400, -1)
    same = np.mean(r[:, :64] == r[:, 64:128])
    assert same < 0.2  # one shared offset would give 1.0
