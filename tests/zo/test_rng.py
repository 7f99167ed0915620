"""Philox4x32-10 against Random123's known-answer vectors, and the stream layout."""

import numpy as np
import pytest

from hilbench.zo.rng import STREAM_BATCH, batch_indices, philox4x32, stream_words

# Random123 tests/kat_vectors, "philox4x32 10" lines: counter, key, expected.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize(("counter", "key", "expected"), KAT)
def test_philox_known_answers(counter, key, expected):
    out = philox4x32(np.array([counter], dtype=np.uint32), key)
    assert tuple(int(v) for v in out[0]) == expected


def test_stream_words_are_philox_blocks_in_order():
    words = stream_words(seed=7, stream=1, tensor=3, n_words=10)
    counter = np.array([[b, 3, 0, 0] for b in range(3)], dtype=np.uint32)
    expected = philox4x32(counter, (7, 1)).reshape(-1)[:10]
    np.testing.assert_array_equal(words, expected)


def test_stream_words_from_an_offset_equal_the_slice():
    whole = stream_words(seed=11, stream=1, tensor=0, n_words=40)
    np.testing.assert_array_equal(stream_words(11, 1, 0, 13, start=6), whole[6:19])


def test_streams_and_tensors_differ():
    a = stream_words(5, 1, 0, 8)
    assert not np.array_equal(a, stream_words(5, 2, 0, 8))
    assert not np.array_equal(a, stream_words(5, 1, 1, 8))
    assert not np.array_equal(a, stream_words(6, 1, 0, 8))


def test_batch_indices_cover_the_range_uniformly():
    idx = batch_indices(batch_seed=3, n_items=10, batch_size=256)
    assert idx.min() >= 0 and idx.max() <= 9
    counts = np.bincount(
        np.concatenate([batch_indices(s, 10, 256) for s in range(40)]), minlength=10
    )
    # 10,240 draws over 10 bins: each near 1,024 (5 sigma is about 150)
    assert counts.min() > 870 and counts.max() < 1180
    words = stream_words(3, STREAM_BATCH, 0, 256).astype(np.uint64)
    np.testing.assert_array_equal(idx, (words * 10) >> 32)


def test_many_seeds_at_once_equal_one_at_a_time():
    from hilbench.zo.rng import stream_words_many

    seeds = np.array([0, 1, 2**32 - 1, 12345], dtype=np.uint32)
    many = stream_words_many(seeds, stream=1, tensor=2, n_words=11)
    for row, seed in zip(many, seeds, strict=True):
        np.testing.assert_array_equal(row, stream_words(int(seed), 1, 2, 11))
