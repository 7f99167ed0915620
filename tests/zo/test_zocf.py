"""The ZOCF section: byte layout, validation against a model, layer selection."""

import numpy as np
import pytest

from hilbench.npu import zoo
from hilbench.zo import zocf
from hilbench.zo.zocf import TensorZo, ZocfError, ZoConfig


@pytest.fixture(scope="module")
def mlp():
    return zoo.build("mlp", seed=0)


def test_defaults_round_trip_and_name_every_weight(mlp):
    cfg = ZoConfig()
    assert ZoConfig.from_bytes(cfg.to_bytes()) == cfg
    assert len(cfg.to_bytes()) == 20
    assert [t.name for t in zocf.resolve(cfg, mlp)] == mlp.trainable()


def test_full_config_round_trips_byte_exactly(mlp):
    names = list(mlp.tensors)
    cfg = ZoConfig(
        distribution="uniform",
        scaling="adaptive",
        estimator="one-sided",
        rounding="stochastic",
        master="int16",
        pool_size=1024,
        pool_seed=0xDEADBEEF,
        tensors=(
            TensorZo(names.index("fc1_w"), 24, 0, tuple(range(1, 11))),
            TensorZo(names.index("fc1_b"), 16, 8),
        ),
    )
    data = cfg.to_bytes()
    assert len(data) == 20 + (8 + 12) + 8
    assert data[:8] == bytes([1, 2, 1, 1, 1, 1, 2, 0])
    assert ZoConfig.from_bytes(data) == cfg
    tr = zocf.resolve(cfg, mlp)
    assert [t.kind for t in tr] == ["weight", "bias"]
    np.testing.assert_array_equal(tr[0].eps_mult, np.arange(1, 11))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b[:10], "header needs"),
        (lambda b: bytes([2]) + b[1:], "version 2"),
        (lambda b: b[:1] + bytes([9]) + b[2:], "distribution code 9"),
        (lambda b: b[:5] + bytes([7]) + b[6:], "master code 7"),
        (lambda b: b + b"\0\0\0\0", "trailing"),
        (lambda b: b[:6] + bytes([3, 0]) + b[8:], "truncated"),
    ],
)
def test_malformed_sections_are_refused_naming_the_field(mutate, message):
    data = ZoConfig(tensors=(TensorZo(1),)).to_bytes()
    with pytest.raises(ZocfError, match=message):
        ZoConfig.from_bytes(mutate(data))


@pytest.mark.parametrize(
    ("tensors", "pool", "message"),
    [
        ((TensorZo(999),), 0, "index 999"),
        ((TensorZo(1), TensorZo(1)), 0, "twice"),
        ((TensorZo(0),), 0, "not a weight or bias"),
        ((TensorZo(1, 0),), 0, "eps_mult 0"),
        ((TensorZo(1, 16, 3),), 0, "unit_shift 0"),
        ((TensorZo(1, 16, 0, (16, 16)),), 0, "2 channel multipliers"),
        ((TensorZo(1),), 32, "shorter than a row"),
    ],
)
def test_configs_that_do_not_fit_the_model_are_refused(mlp, tensors, pool, message):
    with pytest.raises(ZocfError, match=message):
        zocf.resolve(ZoConfig(pool_size=pool, tensors=tensors), mlp)


def test_layer_selection_terms(mlp):
    assert zocf.select_tensors(mlp, "weights") == ["fc0_w", "fc1_w"]
    assert zocf.select_tensors(mlp, "biases") == ["fc0_b", "fc1_b"]
    assert zocf.select_tensors(mlp, "all") == ["fc0_w", "fc0_b", "fc1_w", "fc1_b"]
    assert zocf.select_tensors(mlp, "last:1") == ["fc1_w", "fc1_b"]
    assert zocf.select_tensors(mlp, "fc0_w,biases") == ["fc0_w", "fc0_b", "fc1_b"]
    for bad in ("conv*", "last:3", "last:x", "weights,,biases"):
        with pytest.raises(ValueError):
            zocf.select_tensors(mlp, bad)


def test_build_resolves_names_multipliers_and_defaults(mlp):
    cfg = zocf.build(mlp, layers="all", distribution="uniform", eps_mults={"fc1_*": 0.5})
    assert cfg.scaling == "adaptive"
    by_name = {list(mlp.tensors)[t.index]: t for t in cfg.tensors}
    assert by_name["fc1_w"].eps_mult == 8 and by_name["fc0_w"].eps_mult == 16
    assert by_name["fc0_b"].unit_shift == zocf.BIAS_UNIT_SHIFT
    pc = zocf.build(mlp, per_channel=True)
    assert len(pc.tensors[0].channel_mult) == 32
    with pytest.raises(ValueError, match="matches no trained"):
        zocf.build(mlp, eps_mults={"nothing*": 2.0})
    with pytest.raises(ValueError, match="shorter than a row"):
        zocf.build(mlp, pool_size=16)


def test_fresh_word_accounting(mlp):
    tr = zocf.resolve(ZoConfig(), mlp)
    assert zocf.fresh_words_per_seed(ZoConfig(), tr) == 64 + 10
    assert zocf.fresh_words_per_step(ZoConfig(), tr, q=4) == 8 * 74
    uni = ZoConfig(distribution="uniform")
    assert zocf.fresh_words_per_seed(uni, tr) == (2048 + 320) // 4
    pooled = ZoConfig(distribution="uniform", pool_size=256)
    assert zocf.fresh_words_per_seed(pooled, tr) == 16 + 5
    assert zocf.fresh_numbers_per_seed(pooled, tr) == 42
    sr = ZoConfig(rounding="stochastic")
    assert zocf.fresh_words_per_step(sr, tr, 1) == 2 * 74 + (2048 + 320) // 2
    # numbers: one per element fresh, one per row pooled; one per element rounding in APPLY
    assert zocf.fresh_numbers_per_step(ZoConfig(), tr, q=4) == 8 * 2368
    assert zocf.fresh_numbers_per_step(pooled, tr, q=4) == 8 * 42
    assert zocf.fresh_numbers_per_step(sr, tr, 1) == 2 * 2368 + 2368
    mem = zocf.memory_bytes(ZoConfig(master="int8", pool_size=256), tr)
    assert mem["master"] == 0 and mem["probe_scratch"] == 2368 and mem["pool"] == 256
