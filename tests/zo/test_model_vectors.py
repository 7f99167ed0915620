"""fixtures/golden/model_*.hbgv (device_fw/tests/test_model.c's whole-model vectors) are
current: the twin's ModelState gives the stored results when it reruns every sequence on the
stored model and data blobs."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from hilbench import golden
from hilbench.device import ModelState
from hilbench.protocol import data_blob
from hilbench.zo import perturb

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"


def load_generator():
    path = GOLDEN / "make_model_vectors.py"
    spec = importlib.util.spec_from_file_location("make_model_vectors", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["mlp", "cnn", "dw"])
def test_model_vectors_are_current(name):
    gen = load_generator()
    path = gen.PATHS[name]
    stored = path.read_bytes()
    again = golden.dumps(gen.rebuild_from(golden.loads(stored)))
    assert again == stored, (
        f"{path.name} is stale: run `python fixtures/golden/make_model_vectors.py`"
    )


def test_model_vectors_cover_what_the_c_test_needs():
    """Every file holds its data blob and several configurations; together they train biases,
    depthwise rows, the three masters, stochastic rounding, the one-sided estimator and a
    pool, and run several APPLYs in a row."""
    gen = load_generator()
    masters, layouts, kinds, estimators, pools, roundings = set(), set(), set(), set(), set(), set()
    for name, path in gen.PATHS.items():
        g = golden.read(path)
        x, y = data_blob.decode(bytes(g["data_blob"]))
        np.testing.assert_array_equal(x, g["x"])
        np.testing.assert_array_equal(y, g["y"])
        i = 0
        while f"c{i}.blob" in g:
            st = ModelState.from_blob(bytes(g[f"c{i}.blob"]))
            masters.add(st.zo.master)
            estimators.add(st.zo.estimator)
            roundings.add(st.zo.rounding)
            pools.add(st.zo.pool_size > 0)
            layouts |= {t.layout for t in st.trained}
            kinds |= {t.kind for t in st.trained}
            ops = [int(g[f"c{i}.s{j}.op"][0]) for j in range(10)]
            assert ops == [3, 1, 2, 1, 2, 2, 2, 1, 3, 3]  # three APPLYs in a row
            i += 1
        assert i >= 3, name
    assert masters == {"q16", "int16", "int8"}
    assert layouts == {perturb.ROWS_LEADING, perturb.ROWS_TRAILING}
    assert kinds == {"weight", "bias"} and estimators == {"two-point", "one-sided"}
    assert pools == {True, False} and roundings == {"nearest", "stochastic"}


def test_a_trained_bias_beyond_the_limit_is_clamped_at_load():
    g = golden.read(load_generator().PATHS["mlp"])
    default, every = (
        ModelState.from_blob(bytes(g["c0.blob"])),
        ModelState.from_blob(bytes(g["c1.blob"])),
    )
    assert default.graph.tensors["fc0_b"].data[:3].tolist() == [2**31 - 1, -(2**31), 2**30 + 1]
    assert every.graph.tensors["fc0_b"].data[:3].tolist() == [2**30, -(2**30), 2**30]
