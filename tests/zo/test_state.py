"""The device's PROBE/APPLY math under every ZOCF setting, against direct references."""

import numpy as np
import pytest

from hilbench.device import ModelState
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
    """PROBE's losses equal a reference that reads the pool and multiplies each row by its own
    channel multiplier, written out here (row j of a [out, in] weight is w[j, :]; entry i of
    row j is pool[(o_j + i) mod P]); without the pool or the multipliers they differ."""
    build = dict(distribution="uniform", pool_size=128, pool_seed=5, per_channel=True)
    s = make_state(**build)
    cfg = zocf.build(zoo.build("mlp", seed=1), **build)
    assert s.pool is not None and s.pool.size == 128
    pool = perturb.Pool.generate(5, 128, perturb.UNIFORM).values.astype(np.int64)
    np.testing.assert_array_equal(s.pool.values, pool)
    eps = 2
    plus, minus = {}, {}
    for i, t in enumerate(s.trained):
        rows, length = t.shape
        cm = np.array(cfg.tensors[i].channel_mult, np.int64)
        assert len(set(cm.tolist())) > 1
        off = perturb.pool_offsets(SEEDS, i, rows, 128)
        r = np.empty((len(SEEDS), rows, length), np.int64)
        for k in range(len(SEEDS)):
            for j in range(rows):
                r[k, j] = pool[(off[k, j] + np.arange(length)) % 128]
        scale = perturb.scales(r, perturb.UNIFORM, perturb.ADAPTIVE)
        u = perturb.rsym(r * scale[:, None, None], 8)
        d = perturb.rsym(eps * cm[None, :, None] * u, 12)
        w = s.weights(i).astype(np.int64)
        plus[t.name] = np.clip(w + d, -127, 127).astype(np.int8)
        minus[t.name] = np.clip(w - d, -127, 127).astype(np.int8)
    want = []
    for side in (plus, minus):
        for k in range(len(SEEDS)):
            logits = s.graph.run(X, {n: v[k] for n, v in side.items()})
            want.append(loss.mean_q16(logits[None], Y, s.tables)[0])
    lp, lm = s.probe(X, Y, SEEDS, eps)
    assert lp.tolist() + lm.tolist() == [int(v) for v in want]
    for other in ({**build, "pool_size": 0}, {**build, "per_channel": False}):
        olp, olm = make_state(**other).probe(X, Y, SEEDS, eps)
        assert not (np.array_equal(olp, lp) and np.array_equal(olm, lm)), other


def test_a_depthwise_filter_is_perturbed_and_updated_by_channel_rows():
    """MobileNetV2's first depthwise filter [1, 3, 3, 16] from a pool of 9 with per-channel
    multipliers: PROBE's delta and APPLY's step follow the rows of docs/zo-math.md, written
    out element by element here (row j = elements j, j + 16, ...; entry i of row j is
    pool[(o_j + i) mod P])."""
    g = zoo.build("mobilenet_v2", seed=0, resolution=32)
    tables = loss.LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    cfg = zocf.build(
        g, layers="dwconv1_w", distribution="gaussian", pool_size=9, pool_seed=3, per_channel=True
    )
    s = ModelState.from_blob(to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()}))
    (t,) = s.trained
    cm = np.array(cfg.tensors[0].channel_mult)
    assert t.layout == perturb.ROWS_TRAILING and len(set(cm.tolist())) > 1
    seeds = np.array([5, 6], np.uint32)
    off = perturb.pool_offsets(seeds, 0, 16, 9)
    w0 = s.weights(0).reshape(-1).astype(np.int64).copy()
    delta = np.zeros((2, 144), np.int64)
    u = np.zeros((2, 144), np.int64)
    for k in range(2):
        for e in range(144):
            j, i = e % 16, e // 16
            r = int(s.pool.values[(off[k, j] + i) % 9])
            u[k, e] = r * 128  # gaussian, fixed S = 2^15: u = rsym(r * 2^15, 8)
            x = 3 * int(cm[j]) * int(u[k, e])
            delta[k, e] = (1 if x >= 0 else -1) * ((abs(x) + 2048) >> 12)
    x = np.random.default_rng(1).integers(-128, 128, size=(2, 32, 32, 3)).astype(np.int8)
    y = np.array([1, 7], np.uint8)
    lp, lm = s.probe(x, y, seeds, 3)
    for k in range(2):
        for sign, got in ((1, lp[k]), (-1, lm[k])):
            w = np.clip(w0 + sign * delta[k], -127, 127).astype(np.int8).reshape(t.shape)
            want = loss.mean_q16(s.graph.run(x, {t.name: w})[None], y, tables)[0]
            assert got == want
    assert np.array_equal(s.weights(0).reshape(-1), w0)
    coeffs = np.array([50_000, -70_000], np.int32)
    m0 = s.masters[0].reshape(-1).astype(np.int64).copy()
    s.apply(seeds, coeffs)
    acc = coeffs.astype(np.int64) @ u
    step = (acc * cm[np.arange(144) % 16] + (1 << 11)) >> 12  # q16: s = 28 - 16 = 12
    np.testing.assert_array_equal(
        s.masters[0].reshape(-1), np.clip(m0 - step, -(127 << 16), 127 << 16)
    )
