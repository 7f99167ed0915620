"""ZO arithmetic at its edges: stream and tensor sizes 1, 65536 and 65537, the coefficient
clamp, saturating biases, stochastic rounding offsets word by word, and the per-channel APPLY
(``--eps-per-channel``) against an integer reference and the golden vectors the C test reads.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hilbench import golden
from hilbench.device import ModelState
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.zo import loss, perturb, rng, update, zocf

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"
SIZES = [1, 65536, 65537]


# --- the PRNG streams ------------------------------------------------------------------------
def word(seed: int, stream: int, tensor: int, w: int) -> int:
    """Word ``w`` of a stream from one Philox block: lane w % 4 of block w // 4."""
    block = rng.philox4x32(np.array([[w // 4, tensor, 0, 0]], np.uint32), (seed, stream))
    return int(block[0, w % 4])


@pytest.mark.parametrize("n", SIZES)
def test_stream_sizes_at_the_block_and_16_bit_edges(n: int) -> None:
    words = rng.stream_words(0xDEADBEEF, rng.STREAM_PERTURB, 3, n)
    assert words.shape == (n,) and words.dtype == np.uint32
    for w in {0, n // 2, n - 1}:
        assert int(words[w]) == word(0xDEADBEEF, rng.STREAM_PERTURB, 3, w)
    many = rng.stream_words_many(np.array([0xDEADBEEF, 5], np.uint32), rng.STREAM_PERTURB, 3, n)
    assert many.shape == (2, n)
    np.testing.assert_array_equal(many[0], words)
    assert int(many[1, n - 1]) == word(5, rng.STREAM_PERTURB, 3, n - 1)
    (tens,) = rng.stream_words_tensors(np.array([0xDEADBEEF], np.uint32), 1, [(3, n)])
    np.testing.assert_array_equal(tens[0], words)


def test_stream_windows_start_anywhere_and_empty_is_empty() -> None:
    whole = rng.stream_words(9, 2, 1, 70_000)
    for start, n in [(1, 1), (3, 2), (65535, 2), (65536, 1), (4, 65537)]:
        np.testing.assert_array_equal(rng.stream_words(9, 2, 1, n, start), whole[start : start + n])
    assert rng.stream_words(9, 2, 1, 0).shape == (0,)
    assert rng.stream_words(9, 2, 1, -3).dtype == np.uint32


def test_several_tensors_in_one_call_equal_one_by_one() -> None:
    seeds = np.array([1, 2, 3], np.uint32)
    sizes = [(0, 1), (1, 5), (2, 65537), (7, 4)]
    got = rng.stream_words_tensors(seeds, rng.STREAM_POOL, sizes)
    for (tensor, n), words in zip(sizes, got, strict=True):
        np.testing.assert_array_equal(words, rng.stream_words_many(seeds, 4, tensor, n))


def test_seeds_may_come_as_a_list_or_a_column() -> None:
    want = rng.stream_words_many(np.array([1, 2**32 - 1], np.uint32), 2, 0, 6)
    for seeds in ([1, 2**32 - 1], np.array([[1], [2**32 - 1]], np.uint64)):
        np.testing.assert_array_equal(rng.stream_words_many(seeds, 2, 0, 6), want)
        (got,) = rng.stream_words_tensors(seeds, 2, [(0, 6)])
        np.testing.assert_array_equal(got, want)
    assert int(want[1, 5]) == word(2**32 - 1, 2, 0, 5)


def test_batch_indices_are_the_high_bits_of_word_times_n() -> None:
    idx = rng.batch_indices(77, 1000, 9)
    words = rng.stream_words(77, rng.STREAM_BATCH, 0, 9)
    assert idx.tolist() == [(int(w) * 1000) >> 32 for w in words]
    assert rng.batch_indices(77, 1, 5).tolist() == [0] * 5


# --- raw samples at the size edges ------------------------------------------------------------
@pytest.mark.parametrize("dist", [perturb.RADEMACHER, perturb.GAUSSIAN, perturb.UNIFORM])
@pytest.mark.parametrize("n", SIZES)
def test_samples_of_one_and_of_64k_plus_one_elements(dist: int, n: int) -> None:
    per = perturb.ELEMENTS_PER_WORD[dist]
    assert perturb.words_needed(n, dist) == -(-n // per)
    seeds = np.array([11, 12], np.uint32)
    r = perturb.draw(seeds, 2, (n,), dist)
    assert r.shape == (2, n) and r.dtype == np.int8
    words = rng.stream_words(12, rng.STREAM_PERTURB, 2, perturb.words_needed(n, dist))
    last, w = n - 1, int(words[(n - 1) // per])
    if dist == perturb.RADEMACHER:
        want = 1 if (w >> (last % 32)) & 1 else -1
    elif dist == perturb.GAUSSIAN:
        want = bin((w >> (16 * (last % 2))) & 0xFFFF).count("1") - 8
    else:
        want = 2 * ((w >> (8 * (last % 4))) & 0x7F) - 127
    assert int(r[1, last]) == want
    assert perturb.fresh_words((n,), dist) == perturb.words_needed(n, dist)
    assert perturb.fresh_numbers((n,)) == n


def test_a_longer_tensor_starts_with_the_shorter_ones_samples() -> None:
    seeds = np.array([3], np.uint32)
    for dist in (perturb.RADEMACHER, perturb.GAUSSIAN, perturb.UNIFORM):
        long = perturb.draw(seeds, 0, (65537,), dist)
        np.testing.assert_array_equal(long[:, :65536], perturb.draw(seeds, 0, (65536,), dist))
        np.testing.assert_array_equal(long[:, :1], perturb.draw(seeds, 0, (1,), dist))
    np.testing.assert_array_equal(perturb.rademacher(3, 0, 65537), long_rad(3))


def long_rad(seed: int) -> np.ndarray:
    return perturb.draw(np.array([seed], np.uint32), 0, (65537,), perturb.RADEMACHER)[0]


def test_unknown_distribution_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown distribution 7"):
        perturb.samples_from_words(np.zeros(2, np.uint32), 7, 3)


def test_pool_rows_of_one_element_and_a_pool_of_65536() -> None:
    pool = perturb.Pool.generate(1, perturb.MAX_POOL, perturb.UNIFORM)
    assert pool.size == 65536
    seeds = np.array([8, 9], np.uint32)
    r = perturb.draw(seeds, 1, (5, 1), perturb.UNIFORM, pool)
    off = perturb.pool_offsets(seeds, 1, 5, 65536)
    assert r[:, :, 0].tolist() == pool.values[off].tolist()
    assert perturb.fresh_words((5, 1), perturb.UNIFORM, 65536) == 3
    assert perturb.fresh_numbers((5, 1), 65536) == 5


# --- updates ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fmt", "dtype", "shift"),
    [
        (update.MASTER_Q16, np.int32, 16),
        (update.MASTER_INT16, np.int16, 8),
        (update.MASTER_INT8, np.int8, 0),
    ],
)
def test_masters_of_int8_weights(fmt: int, dtype: type, shift: int) -> None:
    w = np.array([-127, -1, 0, 1, 126, 127], np.int8)
    m = update.master_from_weights(w, fmt)
    assert m.dtype == dtype and m.tolist() == [int(v) << shift for v in w]
    np.testing.assert_array_equal(update.weights_from_master(m, fmt), w)
    if shift:
        half = np.array([(3 << shift) - (1 << (shift - 1)), (3 << shift) - (1 << (shift - 1)) - 1])
        assert update.weights_from_master(half.astype(dtype), fmt).tolist() == [3, 2]  # half up


def test_perturbed_weights_scale_any_integer_direction() -> None:
    w = np.array([0, 100, -100], np.int8)
    u = np.array([[2, -3, 1], [5, 5, -5]], np.int64)
    got = update.perturbed(w, u, 3)
    assert got.dtype == np.int8 and got.tolist() == [[6, 91, -97], [15, 115, -115]]
    assert update.perturbed(w, u, 20).tolist() == [[40, 40, -80], [100, 127, -127]]


def test_a_perturbed_bias_saturates_at_int32() -> None:
    lo, hi = -(2**31), 2**31 - 1
    b = np.array([lo + 5, hi - 5, 0], np.int32)
    d = np.array([[-10, 10, 7], [-5, 5, -7]], np.int64)
    got = update.perturb_bias(b, d)
    assert got.dtype == np.int32 and got.tolist() == [[lo, hi, 7], [lo, hi, -7]]


def test_coefficients_are_clamped_both_ways() -> None:
    u = np.array([[256, -256]], np.int32)
    acc = update.accumulate(u, np.array([2**31 - 1], np.int32))
    assert acc.tolist() == [update.COEFF_LIMIT * 256, -update.COEFF_LIMIT * 256]
    acc = update.accumulate(u, [-(2**40)])
    assert acc.tolist() == [-update.COEFF_LIMIT * 256, update.COEFF_LIMIT * 256]
    acc = update.accumulate(np.array([[1], [1]]), np.array([update.COEFF_LIMIT, 5], np.int32))
    assert acc.tolist() == [update.COEFF_LIMIT + 5]
    grads, coeffs = update.quantize_coefficients(
        np.array([2**30, -(2**30)], np.int64), np.array([-(2**30), 2**30]), 1e6, 1
    )
    assert coeffs.dtype == np.int32 and grads.dtype == np.float64
    assert coeffs.tolist() == [update.COEFF_LIMIT, -update.COEFF_LIMIT]


def test_coefficients_are_two_point_by_default_and_need_equal_lengths() -> None:
    two = update.coefficients([65536 * 3], [65536], 2.0, 4)
    assert two == ([0.25], [round(2.0 * 0.25 * 65536)])
    one = update.coefficients([65536 * 3], [65536], 2.0, 4, one_sided=True)
    assert one == ([0.5], [round(2.0 * 0.5 * 65536)])
    assert update.quantize_coefficients([65536 * 3], [65536], 2.0, 4)[1].tolist() == two[1]
    with pytest.raises(ValueError):
        update.coefficients([1, 2], [1], 1.0, 1)


def test_rounding_offsets_are_16_bit_halves_word_by_word() -> None:
    n = 7
    words = rng.stream_words(42, rng.STREAM_ROUNDING, 3, update.rounding_words(n))
    halves = [(int(words[i // 2]) >> (16 * (i % 2))) & 0xFFFF for i in range(n)]
    for shift in (12, 16, 17, 28):
        got = update.rounding_offsets(42, 3, n, shift)
        want = [h >> (16 - shift) if shift <= 16 else h << (shift - 16) for h in halves]
        assert got.shape == (n,) and got.tolist() == want
        assert got.max() < 2**shift
    assert update.rounding_words(7) == 4 and update.rounding_words(8) == 4


def test_update_shift_bounds_are_named() -> None:
    for bad in (update.MIN_UPDATE_SHIFT - 1, update.UPDATE_SHIFT + 1):
        with pytest.raises(ValueError) as e:
            update.step_from_acc(np.zeros(1, np.int64), 16, bad)
        assert str(e.value) == f"update shift {bad} outside 12..28"


def test_the_default_rule_is_m_minus_sum_c_u() -> None:
    m0 = np.array([[0, 1 << 16, -(127 << 16), 127 << 16]], np.int32)
    seeds = np.array([4, 5], np.uint32)
    coeffs = np.array([3 << 16, -(1 << 16)], np.int32)
    r = perturb.draw(seeds, 0, m0.shape, perturb.RADEMACHER).astype(np.int64)
    want = np.clip(
        m0 - (coeffs[:, None, None] * r).sum(0), -update.MASTER_LIMIT, update.MASTER_LIMIT
    )
    got = update.apply_update(m0, seeds, coeffs, 0)
    assert got.dtype == np.int32 and got.tolist() == want.tolist()


# --- per-channel APPLY (--eps-per-channel) -------------------------------------------------
def test_per_channel_apply_on_the_twin_equals_a_row_by_row_integer_reference() -> None:
    g = zoo.build("mlp", seed=1)
    tables = loss.LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    cfg = zocf.build(g, per_channel=True)
    state = ModelState.from_blob(to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()}))
    plain = ModelState.from_blob(to_blob(g, {"LOSS": tables.to_bytes()}))
    seeds = np.array([21, 22, 23], np.uint32)
    coeffs = np.array([900_000, -700_000, 2**31 - 1], np.int32)  # the last one is clamped
    before = [m.astype(np.int64).copy() for m in state.masters]
    state.apply(seeds, coeffs)
    plain.apply(seeds, coeffs)
    c = np.clip(coeffs.astype(np.int64), -update.COEFF_LIMIT, update.COEFF_LIMIT)
    for i, t in enumerate(state.trained):
        cm = np.array(cfg.tensors[i].channel_mult, np.int64)
        assert len(set(cm.tolist())) > 1 and t.layout == perturb.ROWS_LEADING
        r = perturb.draw(seeds, i, t.shape, perturb.RADEMACHER).astype(np.int64)
        u = r * 256  # Rademacher, fixed S = 2^16: u = rsym(r * 2^16, 8)
        want = before[i].copy()
        rows, length = t.shape
        for j in range(rows):
            for e in range(length):
                acc = int(sum(c[k] * u[k, j, e] for k in range(len(seeds))))
                step = (acc * int(cm[j]) + (1 << 11)) >> 12
                want[j, e] = min(127 << 16, max(-(127 << 16), want[j, e] - step))
        assert state.masters[i].tolist() == want.tolist()
        w = state.weights(i)
        assert w.tolist() == ((want + (1 << 15)) >> 16).tolist()
        assert not np.array_equal(state.masters[i], plain.masters[i])


@pytest.mark.parametrize("case", [14, 15, 17])
def test_per_channel_golden_vectors_follow_the_integer_rule(case: int) -> None:
    """zo.hbgv's update cases with channel multipliers (read by the C test), recomputed here
    element by element from their stored accumulators: row j of a trailing layout is every
    element e with e % R == j; a bias has one row per element."""
    g = golden.read(GOLDEN / "zo.hbgv")
    cfg = g[f"u{case}.cfg"].tolist()
    rows, layout, unit_shift = cfg[6], cfg[8], cfg[10]
    kind_weight = cfg[4] == 1
    frac = update.MASTER_FRAC[cfg[2]] if kind_weight else 0
    shift = update.UPDATE_SHIFT - frac - unit_shift
    limit = (update.WEIGHT_LIMIT << frac) if kind_weight else update.BIAS_LIMIT
    cm, acc, m0 = g[f"u{case}.cm"], g[f"u{case}.acc"], g[f"u{case}.master"]
    stochastic = cfg[3] == update.STOCHASTIC
    r = (
        update.rounding_offsets(int(g[f"u{case}.seeds"][0]), cfg[11], len(m0), shift)
        if stochastic
        else None
    )
    got = []
    for e in range(len(m0)):
        j = e % rows if layout == perturb.ROWS_TRAILING else e // (len(m0) // rows)
        add = int(r[e]) if stochastic else 1 << (shift - 1)
        step = (int(acc[e]) * int(cm[j]) + add) >> shift
        got.append(min(limit, max(-limit, int(m0[e]) - step)))
    assert got == g[f"u{case}.master_after"].tolist()


# --- perturbation arithmetic --------------------------------------------------------------------
def test_isqrt_is_exact_at_squares_and_their_neighbours() -> None:
    xs = [0, 1, 2, 3, 4, 15, 16, 17, 2**32 - 1, 2**32, (2**31 - 1) ** 2 - 1, (2**31 - 1) ** 2]
    xs += [2**62 - 1, 2**62, 2**63 - 1, (3037000499**2) - 1, 3037000499**2]
    got = perturb.isqrt_u64(np.array(xs, np.int64))
    assert got.dtype == np.int64 and got.tolist() == [math.isqrt(x) for x in xs]


def test_rounding_helpers() -> None:
    assert perturb.rshr(np.array([5, -5, 6, -6, 7]), 1).tolist() == [3, -2, 3, -3, 4]
    assert perturb.rshr(np.array([5, -5]), 2).tolist() == [1, -1]
    assert perturb.rshr(np.array([5, -5]), 0).tolist() == [5, -5]
    assert perturb.rsym(np.array([6, -6, 5, -5, 0, 1, -1]), 2).tolist() == [2, -2, 1, -1, 0, 0, 0]


def test_adaptive_scales_are_sqrt_n_over_q_in_q16() -> None:
    r = np.zeros((4, 3), np.int8)
    r[1, 0] = 1  # Q = 1
    r[2] = [127, -127, 127]  # Q = 3 * 127^2: needs more than 8 bits to add up
    r[3] = [5, 0, -3]
    s = perturb.scales(r, perturb.UNIFORM, perturb.ADAPTIVE)
    want = [perturb.SCALE_MAX, perturb.SCALE_MAX]
    want += [math.isqrt((3 << 32) // q) for q in (3 * 127**2, 34)]
    assert s.dtype == np.int64 and s.tolist() == [min(w, perturb.SCALE_MAX) for w in want]
    one = perturb.scales(np.ones((1, 1), np.int8), perturb.UNIFORM, perturb.ADAPTIVE)
    assert one.tolist() == [65536]  # Q = 1, n = 1: S = 2^16 exactly
    fixed = perturb.scales(r, perturb.GAUSSIAN, perturb.FIXED)
    assert fixed.tolist() == [perturb.FIXED_SCALE[perturb.GAUSSIAN]] * 4


def test_pool_sizes_and_row_multipliers() -> None:
    tiny = perturb.Pool.generate(3, 1, perturb.GAUSSIAN)
    assert tiny.size == 1 and tiny.distribution == perturb.GAUSSIAN and tiny.seed == 3
    for bad in (0, perturb.MAX_POOL + 1):
        with pytest.raises(ValueError) as e:
            perturb.Pool.generate(3, bad, perturb.UNIFORM)
        assert str(e.value) == f"pool size {bad} outside 1..65536"
    assert perturb.row_mults(24, (4, 3), perturb.ROWS_LEADING) == 24
    cm = (16, 17, 18, 19)
    lead = perturb.row_mults(np.array(cm), (4, 3), perturb.ROWS_LEADING)
    assert lead.shape == (4, 1) and lead.ravel().tolist() == list(cm)
    trail = perturb.row_mults(np.array(cm), (1, 3, 3, 4), perturb.ROWS_TRAILING)
    assert trail.shape == (1, 1, 1, 4) and trail.ravel().tolist() == list(cm)


def test_draw_takes_seeds_as_a_column() -> None:
    col = perturb.draw(np.array([[1], [2]], np.uint32), 0, (3, 4), perturb.GAUSSIAN)
    flat = perturb.draw(np.array([1, 2], np.uint32), 0, (3, 4), perturb.GAUSSIAN)
    assert col.shape == (2, 3, 4)
    np.testing.assert_array_equal(col, flat)


@pytest.mark.parametrize("shaped", [[[1], [2]], [[1, 2]]])
def test_draw_all_takes_seeds_of_any_shape(shaped: list) -> None:
    shapes = [(3, 4), (2, 5)]
    got = perturb.draw_all(np.array(shaped, np.uint32), shapes, perturb.GAUSSIAN)
    flat = perturb.draw_all(np.array([1, 2], np.uint32), shapes, perturb.GAUSSIAN)
    assert [r.shape for r in got] == [(2, 3, 4), (2, 2, 5)]
    for a, b in zip(got, flat, strict=True):
        np.testing.assert_array_equal(a, b)


def test_draw_all_with_a_pool_and_default_layouts() -> None:
    pool = perturb.Pool.generate(2, 16, perturb.UNIFORM)
    seeds = np.array([1, 2], np.uint32)
    got = perturb.draw_all(seeds, [(3, 4), (2, 5)], perturb.UNIFORM, pool)
    for t, (shape, r) in enumerate(zip([(3, 4), (2, 5)], got, strict=True)):
        np.testing.assert_array_equal(r, perturb.draw(seeds, t, shape, perturb.UNIFORM, pool))
