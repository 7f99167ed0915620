"""Perturbations and integer updates: exact, bounded, and identical however they are split."""

import numpy as np

from hilbench.zo import update
from hilbench.zo.perturb import directions, rademacher, words_needed


def test_rademacher_is_balanced_and_uses_one_bit_per_element():
    u = rademacher(seed=9, tensor=0, n_elements=64_000)
    assert set(np.unique(u)) == {-1, 1}
    assert abs(int(u.sum())) < 4 * np.sqrt(64_000)
    assert words_needed(64_000) == 2000 and words_needed(33) == 2


def test_prefix_property_and_tensor_independence():
    a = rademacher(4, 2, 100)
    np.testing.assert_array_equal(rademacher(4, 2, 37), a[:37])
    assert not np.array_equal(rademacher(4, 3, 100), a)


def test_perturbation_never_touches_weights_and_saturates_in_the_copy():
    w = np.array([[127, -128, 0, 5]], dtype=np.int8)
    u = directions(np.array([1, 2], dtype=np.uint32), 0, w.shape)
    before = w.copy()
    plus, minus = update.perturbed(w, u, 3), update.perturbed(w, u, -3)
    np.testing.assert_array_equal(w, before)
    assert plus.max() <= 127 and minus.min() >= -127
    np.testing.assert_array_equal(plus, np.clip(w.astype(int) + 3 * u, -127, 127))


def test_update_matches_float_reference_and_clamps():
    rng = np.random.default_rng(3)
    w = rng.integers(-100, 100, size=(8, 16)).astype(np.int8)
    master = update.master_from_weights(w)
    seeds = rng.integers(0, 2**32, size=5, dtype=np.uint32)
    coeffs = rng.integers(-40000, 40000, size=5).astype(np.int32)
    new = update.apply_update(master, seeds, coeffs, tensor=1)
    u = directions(seeds, 1, w.shape).astype(np.int64)
    expected = master.astype(np.int64) - np.einsum("k,kij->ij", coeffs.astype(np.int64), u)
    np.testing.assert_array_equal(new, expected)
    w2 = update.weights_from_master(new)
    np.testing.assert_array_equal(w2, np.floor(expected / 65536 + 0.5).astype(np.int8))
    huge = update.apply_update(master, seeds[:1], np.array([2**24 - 1], np.int32), tensor=1)
    assert np.abs(huge).max() <= update.MASTER_LIMIT
    assert np.abs(update.weights_from_master(huge)).max() <= 127


def test_coefficients_follow_the_two_point_formula():
    lp = np.array([70000, 65536], dtype=np.int32)
    lm = np.array([65536, 70000], dtype=np.int32)
    grads, coeffs = update.quantize_coefficients(lp, lm, lr=0.5, eps=2)
    np.testing.assert_allclose(grads, [4464 / 4 / 65536, -4464 / 4 / 65536])
    np.testing.assert_array_equal(
        coeffs, [np.rint(0.5 * 4464 / 4 / 2), -np.rint(0.5 * 4464 / 4 / 2)]
    )


def test_stacked_directions_equal_single_ones():
    seeds = np.array([3, 99, 2**31], dtype=np.uint32)
    stack = directions(seeds, 4, (7, 9))
    for k, seed in enumerate(seeds):
        np.testing.assert_array_equal(stack[k].reshape(-1), rademacher(int(seed), 4, 63))
