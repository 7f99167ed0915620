"""Perturbation directions u(seed) regenerated on both sides of the wire.

v0 has one distribution: Rademacher (+1/-1), one bit of PRNG output per element. Element
``i`` of tensor ``t`` is bit ``i % 32`` of word ``i // 32`` of stream ``(seed, PERTURB)``,
tensor ``t``: a set bit is +1, a clear bit -1.
"""

from __future__ import annotations

import numpy as np

from hilbench.zo.rng import STREAM_PERTURB, stream_words, stream_words_many

_BITS = np.arange(32, dtype=np.uint32)


def words_needed(n_elements: int) -> int:
    """Fresh 32-bit PRNG words one Rademacher direction of ``n_elements`` draws."""
    return (n_elements + 31) // 32


def rademacher(seed: int, tensor: int, n_elements: int) -> np.ndarray:
    """The +1/-1 direction for one tensor (int8, flat)."""
    words = stream_words(seed, STREAM_PERTURB, tensor, words_needed(n_elements))
    bits = (words[:, None] >> _BITS) & np.uint32(1)
    return (bits.reshape(-1)[:n_elements].astype(np.int8) * 2 - 1).astype(np.int8)


def directions(seeds: np.ndarray, tensor: int, shape: tuple[int, ...]) -> np.ndarray:
    """Stacked directions ``(len(seeds), *shape)`` for one tensor, in one PRNG call."""
    n = int(np.prod(shape))
    words = stream_words_many(seeds, STREAM_PERTURB, tensor, words_needed(n))
    bits = (words[:, :, None] >> _BITS) & np.uint32(1)
    u = bits.reshape(len(words), -1)[:, :n].astype(np.int8) * np.int8(2) - np.int8(1)
    return u.reshape((len(words), *shape))
