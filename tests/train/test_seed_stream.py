"""The trainer draws its seeds in blocks: the values must be those of one draw per step."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.train.trainer import SeedStream


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_blocks_give_the_per_step_draws(seed: int) -> None:
    sizes = np.random.default_rng(seed + 7).integers(1, 600, 400)  # crosses many blocks
    per_step = np.random.default_rng(seed)
    stream = SeedStream(np.random.default_rng(seed))
    for n in sizes:
        expected = per_step.integers(0, 2**32, size=int(n), dtype=np.uint32)
        got = stream.take(int(n))
        assert got.dtype == np.uint32
        np.testing.assert_array_equal(got, expected)


def test_taken_draws_are_independent_copies() -> None:
    stream = SeedStream(np.random.default_rng(3))
    first = stream.take(5)
    kept = first.copy()
    stream.take(5)
    first[:] = 0
    np.testing.assert_array_equal(SeedStream(np.random.default_rng(3)).take(5), kept)


@pytest.mark.parametrize("seed", [0, 5])
def test_a_steps_draws_are_take_of_q_plus_one_split(seed: int) -> None:
    """take_step(q): the batch seed (an int) and q seeds (a fresh list of ints) of the same
    draws take(q + 1) gives, mixed with take() calls across many blocks."""
    sizes = np.random.default_rng(seed + 3).integers(1, 600, 300)
    stepped, whole = (
        SeedStream(np.random.default_rng(seed)),
        SeedStream(np.random.default_rng(seed)),
    )
    for i, q in enumerate(sizes):
        q = int(q)
        if i % 3 == 2:  # the other way in, as a resumed run's replay takes them
            np.testing.assert_array_equal(stepped.take(q), whole.take(q))
            continue
        batch_seed, seeds = stepped.take_step(q)
        draws = whole.take(q + 1)
        assert type(batch_seed) is int and batch_seed == int(draws[0])
        assert type(seeds) is list and all(type(s) is int for s in seeds)
        assert seeds == draws[1:].tolist()
        seeds.append(0)  # its own list: changing it changes no later draw
