"""The aligned aggregator (issue 29): least squares over a step's q directions."""

import numpy as np
import pytest

from hilbench.config import RunConfig
from hilbench.errors import ConfigError
from hilbench.npu import zoo
from hilbench.zo import aggregate, zocf
from hilbench.zo.update import coefficients


def _directions(**method):
    g = zoo.build("mlp", seed=1)
    cfg = zocf.build(g, **method)
    trained = zocf.resolve(cfg, g)
    return aggregate.Directions(cfg, trained), trained


def _flat(d: aggregate.Directions, seeds) -> np.ndarray:
    """The directions v_k = u_k M of every trained element, as float rows (q, d)."""
    units = d.units(seeds)
    q = len(seeds)
    return np.concatenate(
        [
            (u.astype(np.float64) * np.asarray(m)).reshape(q, -1)
            for u, m in zip(units, d.mults, strict=True)
        ],
        axis=1,
    )


@pytest.mark.parametrize(
    "method",
    [{}, {"layers": "all"}, {"distribution": "uniform", "scaling": "adaptive", "pool_size": 256}],
    ids=["rademacher", "biases", "uniform-pool"],
)
def test_gram_is_the_exact_inner_products_of_the_directions(method):
    d, trained = _directions(**method)
    seeds = np.array([3, 17, 99, 4096, 2**32 - 1], dtype=np.uint32)
    g = d.gram(seeds)
    v = _flat(d, seeds)
    assert g.dtype == np.int64 and g.shape == (5, 5)
    np.testing.assert_array_equal(g, np.rint(v @ v.T).astype(np.int64))
    assert np.array_equal(g, g.T)
    if not method:  # Rademacher at M = 1.0: each direction has d entries of +-4096
        n = sum(t.size for t in trained)
        assert (np.diag(g) == n * 4096**2).all()
        assert (np.abs(g - np.diag(np.diag(g))) < n * 4096**2 // 4).all()


def test_cholesky_solves_like_lapack_and_is_plain_python():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(12, 40))
    spd = a @ a.T
    b = rng.normal(size=12)
    x = aggregate.solve_spd(spd.tolist(), b.tolist())
    np.testing.assert_allclose(x, np.linalg.solve(spd, b), rtol=1e-10)
    # singular (two equal directions): the ridge keeps it finite
    sing = [[1.0, 1.0], [1.0, 1.0]]
    assert all(np.isfinite(aggregate.solve_spd(sing, [1.0, 1.0])))


def test_one_query_gives_the_mean_coefficients_exactly():
    grads, mean = coefficients([70_001], [69_000], 50.0, 2)
    g = np.array([[123456]], dtype=np.int64)
    assert aggregate.align_coefficients(grads, g, 50.0) == mean


def test_the_step_is_the_projection_of_the_gradient_onto_the_directions():
    d, _ = _directions()
    seeds = np.arange(1, 9, dtype=np.uint32)
    v = _flat(d, seeds) / 4096.0  # in units: Rademacher entries +-1
    rng = np.random.default_rng(5)
    grad = rng.normal(size=v.shape[1])
    y = v @ grad  # what an exact two-point probe measures per direction (nats per unit)
    lr = 0.1  # coefficients of ~10^5: their rounding is below the tolerance
    c = np.array(aggregate.align_coefficients(y.tolist(), d.gram(seeds), lr), dtype=float)
    step = (c / 65536.0) @ v  # what APPLY moves the weights by (before the master's rounding)
    dbar = np.trace(v @ v.T) / len(seeds)
    proj = v.T @ np.linalg.lstsq(v.T, grad, rcond=None)[0]  # the projection onto span(v)
    np.testing.assert_allclose(step, lr * dbar * proj, rtol=2e-4, atol=1e-9)
    # the mean of the same 8 estimates is off the projection by the directions' overlaps
    mean = (lr / len(seeds)) * (y @ v)
    assert np.linalg.norm(mean * len(seeds) - lr * dbar * proj) > 1e-3 * np.linalg.norm(mean)


def test_the_setting_is_checked():
    assert RunConfig(aggregator="align").aggregator == "align"
    with pytest.raises(ConfigError, match="aggregator"):
        RunConfig(aggregator="median")


def test_a_run_sends_the_aligned_coefficients_of_every_step(tmp_path):
    from hilbench import session
    from hilbench.trace import Trace

    cfg = RunConfig(
        model="mlp",
        scheduler="fixed:4",
        aggregator="align",
        lr=40.0,
        budget=400,
        eval_every=400,
        seed=3,
        live=False,
        trace=tmp_path / "a.h5",
    )
    result = session.run(cfg, target=session.direct_target())
    tr = Trace.open(result.trace_path)
    prepared = session.prepare_model(cfg, session.load_data(cfg))
    d = aggregate.Directions(prepared.zo, prepared.trained)
    differs = 0
    for i in range(len(tr.steps)):
        s = tr.step_samples(i)
        grads = [float(x) for x in s["grad"]]
        want = aggregate.align_coefficients(grads, d.gram(s["seed"]), float(tr.steps["lr"][i]))
        assert s["coeff"].tolist() == want
        _, mean = coefficients(s["loss_plus"].tolist(), s["loss_minus"].tolist(), 40.0, 2)
        differs += s["coeff"].tolist() != [4 * c for c in mean]
    assert len(tr.steps) == 50 and differs > 0  # not just the mean times q
