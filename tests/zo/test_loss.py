"""The Q16 integer cross-entropy against float64 math."""

import numpy as np
import pytest

from hilbench.zo.loss import LossTables, ln_q16, mean_q16, per_sample_q16, predictions


def float_cross_entropy(logits, labels, scale):
    f = logits.astype(np.float64) * scale
    m = f.max(-1, keepdims=True)
    lse = np.log(np.exp(f - m).sum(-1)) + m[..., 0]
    fy = np.take_along_axis(f, np.broadcast_to(labels[:, None], (*f.shape[:-1], 1)), -1)[..., 0]
    return lse - fy


@pytest.mark.parametrize("scale", [0.004, 16 / 255, 0.25, 0.9])
def test_q16_loss_tracks_float_cross_entropy(scale):
    rng = np.random.default_rng(0)
    tables = LossTables.for_scale(scale)
    logits = rng.integers(-128, 128, size=(4, 64, 10)).astype(np.int8)
    labels = rng.integers(0, 10, size=64)
    q16 = per_sample_q16(logits, labels, tables) / 65536
    err = np.abs(q16 - float_cross_entropy(logits, labels, scale))
    assert err.max() < 2e-4


def test_ln_q16_is_accurate_over_the_whole_range():
    tables = LossTables.for_scale(0.1)
    s = np.unique(np.geomspace(65536, 2**32 - 1, 5000).astype(np.int64))
    got = ln_q16(s, tables) / 65536
    assert np.abs(got - np.log(s / 65536)).max() < 5e-5  # ~3 Q16 LSB


def test_mean_rounds_half_up_and_ignores_zero_point_shift():
    tables = LossTables.for_scale(0.05)
    rng = np.random.default_rng(1)
    logits = rng.integers(-100, 100, size=(3, 7, 10)).astype(np.int8)
    labels = rng.integers(0, 10, size=7)
    per = per_sample_q16(logits, labels, tables)
    np.testing.assert_array_equal(mean_q16(logits, labels, tables), (per.sum(-1) + 3) // 7)
    shifted = (logits.astype(np.int16) + 20).astype(np.int8)  # same differences, in range
    np.testing.assert_array_equal(per_sample_q16(shifted, labels, tables), per)


def test_tables_round_trip_and_reject_garbage():
    tables = LossTables.for_scale(0.07)
    again = LossTables.from_bytes(tables.to_bytes())
    np.testing.assert_array_equal(again.exp, tables.exp)
    np.testing.assert_array_equal(again.ln, tables.ln)
    with pytest.raises(ValueError, match="bytes"):
        LossTables.from_bytes(tables.to_bytes()[:-1])
    with pytest.raises(ValueError, match="EXP"):
        LossTables.from_bytes(b"\0" * len(tables.to_bytes()))


def test_prediction_ties_take_the_lowest_class():
    logits = np.array([[3, 7, 7, 1], [-5, -5, -5, -5]], dtype=np.int8)
    np.testing.assert_array_equal(predictions(logits), [1, 0])


def test_tables_and_losses_have_the_documented_integer_types():
    """exp uint32, lin and ln int32 (the LOSS section's fields), losses int64, whether the
    tables were computed or read."""
    made = LossTables.for_scale(0.07)
    for tables in (made, LossTables.from_bytes(made.to_bytes())):
        assert (tables.exp.dtype, tables.lin.dtype, tables.ln.dtype) == (
            np.uint32,
            np.int32,
            np.int32,
        )
        logits = np.array([[5, -3, 7], [0, 0, 1]], np.int8)
        assert per_sample_q16(logits, np.array([2, 0]), tables).dtype == np.int64
        assert ln_q16(np.array([70_000]), tables).dtype == np.int64
        for dtype in (np.uint32, np.uint64, np.int64):  # any integer type: the same value
            assert ln_q16(np.array([3_000_000_000], dtype), tables) == ln_q16(
                np.array([3_000_000_000]), tables
            )


def test_a_refused_section_names_its_reason_by_key():
    from hilbench.zo.loss import LossError

    good = LossTables.for_scale(0.07).to_bytes()
    with pytest.raises(LossError) as e:
        LossTables.from_bytes(good[:-1])
    assert e.value.key == "size"
    with pytest.raises(LossError) as e:
        LossTables.from_bytes(b"\0" * len(good))
    assert e.value.key == "exp0"


def test_predictions_and_means_over_leading_axes():
    """Logits (..., N, C): a class per item along the last axis, a mean per leading index,
    as int32 (the device's i32)."""
    tables = LossTables.for_scale(0.07)
    rs = np.random.default_rng(5)
    logits = rs.integers(-128, 128, (3, 4, 6)).astype(np.int8)  # 3 probes, 4 items, 6 classes
    labels = rs.integers(0, 6, 4)
    np.testing.assert_array_equal(predictions(logits), [predictions(p) for p in logits])
    assert predictions(logits).shape == (3, 4)
    means = mean_q16(logits, labels, tables)
    assert means.dtype == np.int32 and means.shape == (3,)
    assert means.tolist() == [int(mean_q16(p, labels, tables)) for p in logits]
