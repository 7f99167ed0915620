"""The device's PROBE/APPLY math under every ZOCF setting, against direct references."""

import numpy as np
import pytest

from hilbench.device.state import ModelState
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.zo import loss, perturb, update, zocf
from hilbench.zo.zocf import ZoConfig

RNG = np.random.default_rng(0)
X = RNG.integers(-128, 128, size=(16, 64)).astype(np.int8)
Y = RNG.integers(0, 10, size=16).astype(np.uint8)
SEEDS = np.array([11, 22, 33], dtype=np.uint32)
COEFFS = np.array([40_000, -25_000, 9_000], dtype=np.int32)


def make_state(cfg: ZoConfig | None = None, **build) -> ModelState:
    g = zoo.build("mlp", seed=1)
    tables = loss.LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    sections = {"LOSS": tables.to_bytes()}
    if build:
        cfg = zocf.build(g, **build)
    if cfg is not None:
        sections["ZOCF"] = cfg.to_bytes()
    return ModelState.from_blob(to_blob(g, sections))


def test_no_section_and_default_section_behave_like_v0():
    a, b = make_state(), make_state(ZoConfig())
    for s in (a, b):
        s.apply(SEEDS, COEFFS)
    assert a.weights_crc() == b.weights_crc()
    ref = make_state()
    for i, name in enumerate(ref.trainable):
        m = update.apply_update(ref.masters[i], SEEDS, COEFFS, i)
        np.testing.assert_array_equal(a.graph.tensors[name].data, update.weights_from_master(m))


def test_one_sided_probe_returns_the_unperturbed_loss_as_loss_minus():
    two, one = make_state(), make_state(estimator="one-sided")
    lp2, _ = two.probe(X, Y, SEEDS, 2)
    lp1, lm1 = one.probe(X, Y, SEEDS, 2)
    np.testing.assert_array_equal(lp1, lp2)
    logits = one.graph.run(X)
    l0 = loss.mean_q16(logits, Y, one.tables)
    np.testing.assert_array_equal(lm1, np.full(3, l0))


@pytest.mark.parametrize("dist", ["gaussian", "uniform"])
def test_probe_applies_the_documented_integer_delta(dist):
    s = make_state(distribution=dist)
    lp, _ = s.probe(X, Y, SEEDS[:1], 3)
    overrides = {}
    for i, t in enumerate(s.trained):
        r = perturb.draw(SEEDS[:1], i, t.shape, perturb.DISTRIBUTIONS[dist])
        sc = perturb.scales(r, perturb.DISTRIBUTIONS[dist], s.zo.scaling_code)
        d = perturb.deltas(perturb.units(r, sc), 3, 16, 0)
        overrides[t.name] = np.clip(s.weights(i).astype(int) + d[0], -127, 127).astype(np.int8)
    want = loss.mean_q16(s.graph.run(X, overrides)[None], Y, s.tables)[0]
    assert lp[0] == want


def test_probe_leaves_weights_untouched_even_when_perturbations_saturate():
    s = make_state(distribution="gaussian")
    s.graph.tensors["fc0_w"].data[:] = 127
    before = s.weights_crc()
    s.probe(X, Y, SEEDS, 100)
    assert s.weights_crc() == before


@pytest.mark.parametrize("master", ["q16", "int16", "int8"])
def test_apply_follows_the_update_formula_for_each_master(master):
    s = make_state(master=master, distribution="uniform")
    f = update.MASTER_FRAC[update.MASTERS[master]]
    m0 = [m.astype(np.int64).copy() for m in s.masters]
    s.apply(SEEDS, COEFFS)
    for i, t in enumerate(s.trained):
        r = perturb.draw(SEEDS, i, t.shape, perturb.UNIFORM)
        u = perturb.units(r, perturb.scales(r, perturb.UNIFORM, perturb.ADAPTIVE)).astype(object)
        acc = sum(int(c) * u[k] for k, c in enumerate(COEFFS))
        sh = 28 - f
        step = np.vectorize(lambda a, sh=sh: (a * 16 + (1 << (sh - 1))) >> sh)(acc)
        want = np.clip(m0[i] - step.astype(np.int64), -(127 << f), 127 << f)
        np.testing.assert_array_equal(s.masters[i].astype(np.int64), want)
        np.testing.assert_array_equal(
            s.weights(i), update.weights_from_master(s.masters[i], s.zo.master_code)
        )
    assert s.masters[0].dtype == update.MASTER_DTYPE[update.MASTERS[master]]


def test_stochastic_rounding_is_unbiased_where_nearest_loses_small_steps():
    """A pure-int8 master with steps of 0.3 LSB: nearest never moves, stochastic moves by
    0.3 LSB per step on average (bits from the rounding stream keyed by seeds[0])."""
    results = {}
    for rounding in ("nearest", "stochastic"):
        s = make_state(master="int8", rounding=rounding)
        w0 = s.weights(0).astype(float).copy()
        coeff = round(0.3 * 65536)
        for step in range(50):
            seeds = np.array([1000 + step], np.uint32)
            r = perturb.draw(seeds, 0, s.trained[0].shape, perturb.RADEMACHER)[0]
            s.apply(seeds, np.array([coeff], np.int32))
            if step == 0:
                first = (w0 - s.weights(0)) * r
        inner = np.abs(w0) < 100
        results[rounding] = (first[inner].mean(),)
    assert results["nearest"][0] == 0
    assert abs(results["stochastic"][0] - 0.3) < 0.03
    offsets = update.rounding_offsets(1000, 0, 10, 28)
    assert offsets.min() >= 0 and offsets.max() < 2**28


def test_biases_train_in_their_own_lsbs_and_stay_bounded():
    s = make_state(layers="biases")
    assert s.trainable == ["fc0_b", "fc1_b"]
    w_before = s.graph.tensors["fc0_w"].data.copy()
    s.apply(SEEDS, COEFFS)
    np.testing.assert_array_equal(s.graph.tensors["fc0_w"].data, w_before)
    b = s.graph.tensors["fc0_b"].data
    r = perturb.draw(SEEDS, 0, (32,), perturb.RADEMACHER).astype(np.int64)
    acc = (COEFFS.astype(np.int64)[:, None] * r * 256).sum(0)
    np.testing.assert_array_equal(b, -((acc * 16 + (1 << 19)) >> 20))
    lp, lm = s.probe(X, Y, SEEDS, 2)
    assert not np.array_equal(lp, lm)
    s.apply(SEEDS, np.array([2**31 - 1] * 3, np.int32))
    assert np.abs(s.graph.tensors["fc0_b"].data).max() <= update.BIAS_LIMIT


def test_pool_and_channel_multipliers_reach_the_probe():
    s = make_state(distribution="uniform", pool_size=128, pool_seed=5, per_channel=True)
    assert s.pool is not None and s.pool.size == 128
    assert isinstance(s.trained[0].eps_mult, np.ndarray)
    lp, lm = s.probe(X, Y, SEEDS, 2)
    assert lp.shape == (3,) and not np.array_equal(lp, lm)
