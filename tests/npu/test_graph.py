import numpy as np
import pytest

from hilbench.errors import ModelError
from hilbench.npu import zoo
from hilbench.npu.graph import Graph, Op


@pytest.fixture(scope="module")
def mlp() -> Graph:
    return zoo.build_mlp(seed=3)


def _x(n=7, seed=0):
    return np.random.default_rng(seed).integers(-128, 128, (n, 64)).astype(np.int8)


def test_run_shapes(mlp):
    x = _x()
    assert mlp.run(x).shape == (7, 10)
    assert mlp.run(x).dtype == np.int8
    w0 = mlp.tensors["fc0_w"].data
    y = mlp.run(x, {"fc0_w": np.stack([w0, w0, w0, w0])})
    assert y.shape == (4, 7, 10)
    np.testing.assert_array_equal(y[2], mlp.run(x))
    # override of the last layer only: earlier activations are shared
    w1 = mlp.tensors["fc1_w"].data
    y = mlp.run(x, {"fc1_w": np.stack([w1, -w1])})
    assert y.shape == (2, 7, 10)
    np.testing.assert_array_equal(y[0], mlp.run(x))
    np.testing.assert_array_equal(y[1], mlp.run(x, {"fc1_w": -w1}))


def test_batched_equals_one_at_a_time(mlp):
    rng = np.random.default_rng(5)
    x = _x(9)
    sets = {n: mlp.tensors[n].data for n in ("fc0_w", "fc0_b", "fc1_w", "fc1_b")}
    batched = {}
    for name, base in sets.items():
        lim = 127 if base.dtype == np.int8 else 2**30
        noise = rng.integers(-3, 4, (5, *base.shape))
        batched[name] = np.clip(base.astype(np.int64) + noise, -lim, lim).astype(base.dtype)
    y = mlp.run(x, batched)
    for i in range(5):
        one = {n: a[i] for n, a in batched.items()}
        np.testing.assert_array_equal(y[i], mlp.run(x, one))


def test_run_all(mlp):
    x = _x()
    acts = mlp.run_all(x)
    assert list(acts) == ["input", "fc0_out", "logits"]
    assert acts["fc0_out"].shape == (7, 32)
    np.testing.assert_array_equal(acts["logits"], mlp.run(x))
    w0 = mlp.tensors["fc1_w"].data
    acts = mlp.run_all(x, {"fc1_w": np.stack([w0] * 3)})
    assert acts["fc0_out"].shape == (3, 7, 32)
    assert acts["logits"].shape == (3, 7, 10)


def test_trainable(mlp):
    assert mlp.trainable() == ["fc0_w", "fc1_w"]
    assert mlp.weight_tensors() == [("fc0_w", "fc0_b"), ("fc1_w", "fc1_b")]
    assert mlp.num_parameters() == 64 * 32 + 32 + 32 * 10 + 10


@pytest.mark.parametrize(
    ("x", "match"),
    [
        (np.zeros((3, 64), np.float32), "dtype"),
        (np.zeros((3, 63), np.int8), r"shape.*\(N, 64\)"),
        (np.zeros((64,), np.int8), "shape"),
        ([[0] * 64], "list"),
    ],
)
def test_run_rejects_bad_input(mlp, x, match):
    with pytest.raises(ModelError, match=match):
        mlp.run(x)


@pytest.mark.parametrize(
    ("ov", "match"),
    [
        ({"nope": np.zeros(3, np.int8)}, "not a constant"),
        ({"fc0_out": np.zeros(32, np.int8)}, "not a constant"),
        ({"fc0_w": np.zeros((32, 64), np.int32)}, "dtype"),
        ({"fc0_w": np.zeros((32, 65), np.int8)}, "shape"),
        (
            {"fc0_w": np.zeros((2, 32, 64), np.int8), "fc1_w": np.zeros((3, 10, 32), np.int8)},
            "weight sets",
        ),
    ],
)
def test_run_rejects_bad_overrides(mlp, ov, match):
    with pytest.raises(ModelError, match=match):
        mlp.run(_x(), ov)


def _broken(mutate) -> Graph:
    g = zoo.build_mlp(seed=1)
    mutate(g)
    return g


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (
            lambda g: setattr(g.tensors["fc0_w"].qparams, "zero_point", np.ones(32, np.int32)),
            "fc0_w.*symmetric",
        ),
        (lambda g: g.tensors["fc0_w"].data.__setitem__((0, 0), -128), r"fc0_w.*\[-127, 127\]"),
        (
            lambda g: setattr(
                g.tensors["fc1_b"].qparams, "scale", g.tensors["fc1_b"].qparams.scale * 1.01
            ),
            "fc1_b.*input_scale",
        ),
        (
            lambda g: setattr(
                g.tensors["fc0_out"].qparams, "zero_point", np.array([200], np.int32)
            ),
            "fc0_out.*zero point",
        ),
        (
            lambda g: setattr(g.tensors["input"].qparams, "scale", np.array([0.0], np.float32)),
            "input.*> 0",
        ),
        (lambda g: setattr(g.tensors["fc0_w"], "data", np.zeros((32, 64), np.int32)), "fc0_w"),
        (lambda g: g.ops[0].params.__setitem__("act_max", 100), "act_max"),
        (lambda g: g.ops.reverse(), "before it is computed"),
        (lambda g: g.ops.append(Op("CONV_3D", ["logits"], ["x"], {})), "unsupported op"),
        (lambda g: setattr(g.tensors["logits"], "shape", (11,)), "logits"),
    ],
)
def test_validate_names_rule_and_tensor(mutate, match):
    with pytest.raises(ModelError, match=match):
        _broken(mutate).validate()


def test_with_constants(mlp):
    w = mlp.tensors["fc1_w"].data
    g2 = mlp.with_constants({"fc1_w": -w})
    np.testing.assert_array_equal(g2.run(_x()), mlp.run(_x(), {"fc1_w": -w}))
    assert mlp.tensors["fc1_w"].data is w
