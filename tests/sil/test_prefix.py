"""The frozen prefix (issue 25): a PROBE whose trained tensors all lie in later ops runs the ops
before the cut once per item and only the rest per weight set, in the twin
(hilbench.device.model.ModelState.probe) and in the firmware (core/model.c, in the arena's free
bytes), with the same numbers as the whole graph per set; a --layers run ends with the weights
of main before the change, on the twin and on the SIL.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from hilbench import session
from hilbench.config import RunConfig
from hilbench.device import plan
from hilbench.device.model import ModelState
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables

MNV2 = {"alpha": 0.35, "resolution": 32, "classes": 10}


def _state(name: str, kw: dict, **method) -> ModelState:
    g = zoo.build(name, seed=3, **kw)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    cfg = zocf.build(g, **method)
    return ModelState.from_blob(to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()}))


def test_the_cut_of_mobilenet_head_only_is_the_pooled_features():
    st = _state("mobilenet_v2", MNV2, layers="last:1")
    split = st.frozen_prefix()
    assert split is not None
    head, rest = split
    assert len(head.ops) == len(st.graph.ops) - 1 and [op.kind for op in rest.ops] == [
        st.graph.ops[-1].kind
    ]
    sc = plan.probe_scratch(st.graph, st.trained, 32)
    n = int(np.prod(st.graph.tensors[head.output].shape))
    assert sc.cut == len(head.ops) and sc.prefix_bytes == 32 * plan.pad16(n)
    # the copy: its offsets, the head's int8 weights and int32 biases, each padded to 16
    assert sc.copy_bytes == plan.pad16(4 * len(st.trained)) + sum(
        plan.pad16(t.size * (4 if t.kind == "bias" else 1)) for t in st.trained)  # fmt: skip
    assert sc.plan(sc.prefix_bytes + sc.copy_bytes) == (True, True)
    assert sc.plan(sc.prefix_bytes) == (True, False)
    assert sc.plan(sc.prefix_bytes - 1) == (False, sc.copy_bytes <= sc.prefix_bytes - 1)


def _crossing(g, c: int) -> set[str]:
    """Activations produced before op c (or the input) and read from op c on."""
    born = {g.input} | {n for op in g.ops[:c] for n in op.outputs}
    read = {n for op in g.ops[c:] for n in op.inputs} | {g.output}
    return {n for n in born & read if g.tensors[n].data is None}


def test_a_cut_inside_a_residual_block_moves_back_to_its_start():
    g = zoo.build("mobilenet_v2", seed=3, **MNV2)
    j = max(k for k, op in enumerate(g.ops) if op.kind == "ADD")  # the last residual ADD
    assert len(_crossing(g, j)) == 2  # the block's input and its branch
    c, tensor = g.cut(j)
    assert c < j and _crossing(g, c) == {tensor}
    assert all(len(_crossing(g, k)) > 1 for k in range(c + 1, j + 1))
    assert g.cut(0) is None


@pytest.mark.parametrize(
    ("name", "kw", "method"),
    [
        ("mlp", {}, {"layers": "last:1"}),
        ("cnn", {}, {"layers": "last:2", "distribution": "uniform", "pool_size": 512}),
        ("cnn", {}, {"layers": "last:1", "estimator": "one-sided"}),
        ("mobilenet_v2", MNV2, {"layers": "last:1"}),
        ("mobilenet_v2", MNV2, {"layers": "last:3", "distribution": "gaussian"}),
    ],
    ids=lambda v: str(v),
)
def test_prefix_probe_equals_the_whole_graph_per_set(name, kw, method):
    st = _state(name, kw, **method)
    assert st.frozen_prefix() is not None
    r = np.random.default_rng(11)
    x = r.integers(-128, 128, (9, *st.graph.input_shape)).astype(np.int8)
    y = r.integers(0, st.output_size, 9).astype(np.uint8)
    seeds = np.array([3, 0x9E3779B9, 77], np.uint32)
    for eps in (1, 40):
        fast = st.probe(x, y, seeds, eps)
        ref = st.probe(x, y, seeds, eps, prefix=False)
        for a, b in zip(fast, ref, strict=True):
            np.testing.assert_array_equal(a, b)
        assert len(set(fast[0].tolist()) | set(fast[1].tolist())) > 1  # the losses move


# weights CRCs of main before the frozen prefix (9f02333), `python -m hilbench run --no-live
# --model M --layers last:1 --budget 1280 --seed 5` on the twin
MAIN_CRC = {"mlp": 0x3A339A4A, "cnn": 0xEA9027E2}


@pytest.mark.parametrize("model", sorted(MAIN_CRC))
def test_layers_run_gives_main_weights_on_twin_and_sil(model, tmp_path, sil_path):
    crcs = {}
    for backend in ("emulate", "sil"):
        config = RunConfig(
            backend=backend,
            firmware=str(sil_path) if backend == "sil" else None,
            model=model,
            layers="last:1",
            budget=1280,
            scheduler="fixed:4",  # the schedule MAIN_CRC was recorded with
            lr=175.0,
            seed=5,
            live=False,
            trace=tmp_path / f"{backend}.h5",
        )
        crcs[backend] = session.run(config).weights_crc
    assert crcs == {"emulate": MAIN_CRC[model], "sil": MAIN_CRC[model]}


@pytest.mark.parametrize(
    ("name", "kw", "layers", "batch", "method"),
    [
        ("cnn", {}, "last:1", 32, {}),
        ("mobilenet_v2", MNV2, "last:1", 4, {}),
        ("mlp", {}, "all", 8, {}),
        ("mlp", {}, "all", 8, {"distribution": "uniform"}),
        ("mlp", {}, "all", 8, {"distribution": "gaussian"}),
        ("mlp", {}, "all", 8, {"distribution": "uniform", "pool_size": 512, "pool_seed": 1}),
    ],
)
def test_the_firmware_books_the_twins_scratch(name, kw, layers, batch, method, tmp_path):
    """hilbench-bench zo (the core's hb_model_cut / prefix / copy figures) against
    plan.probe_scratch; its PROBE losses with the scratch and without (--no-scratch) equal."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_firmware as bf

    g = zoo.build(name, seed=0, **kw)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    cfg = zocf.build(g, layers=layers, **method)
    blob = to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()})
    r = np.random.default_rng(7)
    x = r.integers(-128, 128, (8, int(np.prod(g.input_shape)))).astype(np.int8)
    y = r.integers(0, int(np.prod(g.output_shape)), 8).astype(np.uint8)
    for f, data in (("m.blob", blob), ("x", x.tobytes()), ("y", y.tobytes())):
        (tmp_path / f).write_bytes(data)
    binary = bf.build_bench()
    args = ["zo", *(str(tmp_path / f) for f in ("m.blob", "x", "y")), "--q", "2", "--batch",
            str(batch), "--runs", "1", "--item-runs", "1"]  # fmt: skip
    fast, ref = bf.run_bench(binary, *args), bf.run_bench(binary, *args, "--no-scratch")
    sc = plan.probe_scratch(g, zocf.resolve(cfg, g), batch, cfg.distribution, cfg.pool_size)
    zo = fast.get("zo")
    assert (int(zo["cut_op"]), int(zo["prefix_bytes"]), int(zo["copy_bytes"])) == (
        sc.cut, sc.prefix_bytes, sc.copy_bytes)  # fmt: skip
    assert (zo["used_prefix"], zo["used_copy"]) == ("1" if sc.cut else "0", "1")
    assert ref.get("zo")["used_prefix"] == ref.get("zo")["used_copy"] == "0"
    # the seed's buffered words: the same books, used where there is no pool
    assert int(zo["words_bytes"]) == sc.words_bytes
    assert zo["used_words"] == ("1" if sc.words(int(zo["scratch_bytes"])) else "0")
    assert sc.words_bytes > 0 and zo["used_words"] == "1" and ref.get("zo")["used_words"] == "0"
    assert fast.get("zo_losses") == ref.get("zo_losses")


@pytest.mark.parametrize(
    ("name", "kw", "layers", "partial"),
    [
        ("cnn", {}, "last:1", False),
        ("mobilenet_v2", MNV2, "last:1", False),
        ("mobilenet_v2", MNV2, "last:1", True),
        ("mlp", {}, "all", False),
    ],
)
def test_the_firmwares_prefix_cache_is_the_twins_rule(name, kw, layers, partial, tmp_path):
    """hilbench-bench zo's EVAL of every item: the same hits and loss without the prefix
    cache, making its entries and reading them, in fewer ticks; its cap and bytes are
    plan.prefix_cache's for the bench's free bytes (a small arena: a partial cache)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_firmware as bf

    g = zoo.build(name, seed=0, **kw)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    cfg = zocf.build(g, layers=layers)
    blob = to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()})
    r = np.random.default_rng(7)
    n = 40
    x = r.integers(-128, 128, (n, int(np.prod(g.input_shape)))).astype(np.int8)
    y = r.integers(0, int(np.prod(g.output_shape)), n).astype(np.uint8)
    for f, data in (("m.blob", blob), ("x", x.tobytes()), ("y", y.tobytes())):
        (tmp_path / f).write_bytes(data)
    args = ["zo", *(str(tmp_path / f) for f in ("m.blob", "x", "y")), "--q", "1", "--batch",
            "4", "--runs", "1", "--item-runs", "1"]  # fmt: skip
    binary = bf.build_bench()
    rep = bf.run_bench(binary, *args)
    if partial:  # an arena with room for 10 entries beyond the PROBE's reserve
        sc = plan.probe_scratch(g, zocf.resolve(cfg, g), 1)
        room = sc.copy_bytes + (plan.CACHE_RESERVE_ITEMS + 10) * sc.prefix_bytes + 16
        arena = plan.pad16(int(rep.get("zo")["arena"])) + room
        rep = bf.run_bench(binary, *args, "--arena-bytes", str(arena))
    zo, ev = rep.get("zo"), rep.get("zo_eval")
    free = int(zo["scratch_bytes"])
    parts = plan.prefix_cache(g, zocf.resolve(cfg, g), free, [(0, n)])
    cap, size = (parts[0].cap, parts[0].bytes) if parts else (0, 0)
    assert (int(ev["cache_cap"]), int(ev["cache_bytes"])) == (cap, size)
    assert ev["same"] == "1" and int(ev["items"]) == n
    if partial:
        assert cap == 10
    if cap == n:  # every item read back: the ops before the cut not run again
        assert int(ev["cached"]) < int(ev["plain"]) / 2
