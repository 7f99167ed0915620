"""Counter-based PRNG shared by host and device: Philox4x32-10 (Random123), vectorised.

A stream is named by a key ``(seed, stream)`` and indexed by a counter
``(block, tensor, 0, 0)``; each block yields four 32-bit words. Word ``w`` of a stream is
lane ``w % 4`` of block ``w // 4``. Only 32-bit multiplies, xors and adds: a Cortex-M does
the same in a few cycles per word. The spec is in ``docs/zo-math.md``.
"""

from __future__ import annotations

import numpy as np

PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
ROUNDS = 10

# Stream identifiers (the second key word). Keep in step with docs/zo-math.md.
STREAM_PERTURB = 1
STREAM_BATCH = 2
STREAM_ROUNDING = 3
STREAM_POOL = 4

_MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32(
    counter: np.ndarray, key: tuple[int, int] | np.ndarray, rounds: int = ROUNDS
) -> np.ndarray:
    """Philox4x32-R of each row of ``counter`` (n, 4) under ``key``: one (k0, k1) pair, or
    one pair per row (n, 2). Returns (n, 4) uint32."""
    c = np.asarray(counter, dtype=np.uint32).reshape(-1, 4).astype(np.uint64)
    c0, c1, c2, c3 = c[:, 0], c[:, 1], c[:, 2], c[:, 3]
    k = np.asarray(key, dtype=np.uint64).reshape(-1, 2)
    k0, k1 = k[:, 0], k[:, 1]
    m0, m1 = np.uint64(PHILOX_M0), np.uint64(PHILOX_M1)
    w0, w1, s32 = np.uint64(PHILOX_W0), np.uint64(PHILOX_W1), np.uint64(32)
    for r in range(rounds):
        if r:
            k0 = (k0 + w0) & _MASK32
            k1 = (k1 + w1) & _MASK32
        p0 = c0 * m0
        p1 = c2 * m1
        c0, c1, c2, c3 = (p1 >> s32) ^ c1 ^ k0, p1 & _MASK32, (p0 >> s32) ^ c3 ^ k1, p0 & _MASK32
    return np.stack([c0, c1, c2, c3], axis=1).astype(np.uint32)


def stream_words_many(seeds: np.ndarray, stream: int, tensor: int, n_words: int) -> np.ndarray:
    """Words ``0 .. n_words-1`` of the streams of several seeds at once: (len(seeds), n_words)."""
    seeds = np.asarray(seeds, dtype=np.uint32).reshape(-1)
    n_blocks = (n_words + 3) // 4
    counter = np.zeros((seeds.size, n_blocks, 4), dtype=np.uint32)
    counter[:, :, 0] = np.arange(n_blocks, dtype=np.uint32)
    counter[:, :, 1] = tensor
    key = np.empty((seeds.size, n_blocks, 2), dtype=np.uint32)
    key[:, :, 0] = seeds[:, None]
    key[:, :, 1] = stream
    words = philox4x32(counter.reshape(-1, 4), key.reshape(-1, 2))
    return words.reshape(seeds.size, n_blocks * 4)[:, :n_words]


def stream_words_tensors(
    seeds: np.ndarray, stream: int, sizes: list[tuple[int, int]]
) -> list[np.ndarray]:
    """``stream_words_many`` for several ``(tensor, n_words)`` at once, in one Philox call:
    one (len(seeds), n_words) array per entry."""
    seeds = np.asarray(seeds, dtype=np.uint32).reshape(-1)
    blocks = [(n + 3) // 4 for _, n in sizes]
    total = sum(blocks)
    counter = np.zeros((seeds.size, total, 4), dtype=np.uint32)
    pos = 0
    for (tensor, _), nb in zip(sizes, blocks, strict=True):
        counter[:, pos : pos + nb, 0] = np.arange(nb, dtype=np.uint32)
        counter[:, pos : pos + nb, 1] = tensor
        pos += nb
    key = np.empty((seeds.size, total, 2), dtype=np.uint32)
    key[:, :, 0] = seeds[:, None]
    key[:, :, 1] = stream
    words = philox4x32(counter.reshape(-1, 4), key.reshape(-1, 2)).reshape(seeds.size, -1)
    out, pos = [], 0
    for (_, n), nb in zip(sizes, blocks, strict=True):
        out.append(words[:, 4 * pos : 4 * pos + n])
        pos += nb
    return out


def stream_words(seed: int, stream: int, tensor: int, n_words: int, start: int = 0) -> np.ndarray:
    """Words ``start .. start+n_words-1`` of the stream keyed ``(seed, stream)`` for ``tensor``."""
    if n_words <= 0:
        return np.zeros(0, dtype=np.uint32)
    first, last = start // 4, (start + n_words - 1) // 4
    blocks = np.arange(first, last + 1, dtype=np.uint64)
    counter = np.zeros((blocks.size, 4), dtype=np.uint32)
    counter[:, 0] = blocks.astype(np.uint32)
    counter[:, 1] = tensor
    words = philox4x32(counter, (seed, stream)).reshape(-1)
    offset = start - first * 4
    return words[offset : offset + n_words]


def batch_indices(batch_seed: int, n_items: int, batch_size: int) -> np.ndarray:
    """Indices of one mini-batch, drawn with replacement: ``(word * n_items) >> 32``."""
    words = stream_words(batch_seed, STREAM_BATCH, 0, batch_size).astype(np.uint64)
    return ((words * np.uint64(n_items)) >> np.uint64(32)).astype(np.int64)
