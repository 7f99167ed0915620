"""The activation planner (hilbench/device/plan.py, mirrored by device_fw/core/plan.c; the C
side is checked on the golden vectors by device_fw/tests/test_blob.c and test_graph.c)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hilbench.device import plan
from hilbench.npu import zoo
from hilbench.npu.graph import Graph, Op, QParams, Tensor

ZOO = {
    "mlp": {},
    "cnn": {},
    "mobilenet_v2": {"alpha": 0.35, "resolution": 32},
    "resnet18": {"width": 0.25, "resolution": 32},
}


def _overlap(a: plan.Buffer, b: plan.Buffer) -> tuple[bool, bool]:
    """(lives overlap, bytes overlap)"""
    return (a.first <= b.last and b.first <= a.last, a.offset < b.end and b.offset < a.end)


def check_plan(graph: Graph) -> list[plan.Buffer]:
    """Every property the planner promises, checked by brute force."""
    bufs = plan.placement(graph)
    names = [b.tensor for b in bufs]
    assert names[0] == graph.input
    assert names[1:] == [o for op in graph.ops for o in op.outputs]  # birth order
    for i, b in enumerate(bufs):
        assert b.offset % plan.ALIGN == 0
        assert b.size == math.prod(graph.tensors[b.tensor].shape)
        for a in bufs[:i]:
            lives, placed = _overlap(a, b)
            assert not (lives and placed), f"{a} and {b} share bytes while both live"
        # the lowest offset: every lower multiple of 16 collides with an earlier live buffer
        for off in range(0, b.offset, plan.ALIGN):
            trial = plan.Buffer(b.tensor, b.size, b.first, b.last, off)
            assert any(all(_overlap(a, trial)) for a in bufs[:i]), f"{b.tensor} fits at {off}"
    assert plan.act_bytes(graph) == plan.pad16(max(b.end for b in bufs))
    return bufs


def _lives(graph: Graph) -> dict[str, tuple[int, int]]:
    return {n: (f, last) for n, _, f, last in plan.lives(graph)}


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_plans(name):
    g = zoo.build(name, seed=1, **ZOO[name])
    bufs = check_plan(g)
    act = plan.act_bytes(g)
    weights = sum(t.data.nbytes for t in g.tensors.values() if t.data is not None)
    largest = max(b.size for b in bufs)
    print(f"{name}: act_bytes {act}, constants {weights} bytes, largest activation {largest}")
    # the plan reuses memory: far less than every activation side by side
    assert act <= sum(plan.pad16(b.size) for b in bufs)
    if len(g.ops) > 4:
        assert act < sum(plan.pad16(b.size) for b in bufs) / 2


def test_mlp_by_hand():
    """64 -> 32 -> 10: input [0, 0], hidden [0, 1], logits [1, 2]: the logits reuse the
    input's bytes, the hidden layer sits above the input: 96 bytes."""
    g = zoo.build_mlp((64, 32, 10), seed=0)
    bufs = {b.tensor: b for b in plan.placement(g)}
    assert [(b.first, b.last, b.offset, b.size) for b in bufs.values()] == [
        (0, 0, 0, 64),
        (0, 1, 64, 32),
        (1, 2, 0, 10),
    ]
    assert plan.act_bytes(g) == 96


def _act(name: str, shape: tuple[int, ...]) -> Tensor:
    return Tensor(name, shape, "int8", QParams([0.1], [0]))


def random_dag(rng: np.random.Generator) -> Graph:
    """A random graph of ADDs and RESHAPEs over earlier activations (residual-like lives);
    the planner reads only shapes and data flow, so no params are needed."""
    n = int(rng.integers(1, 40))
    tensors = {"x": _act("x", (int(rng.integers(1, 200)),))}
    # some ops read the input again much later, some start a new chain of another size
    live = ["x"]
    ops = []
    for j in range(n):
        a, b = (live[int(rng.integers(len(live)))] for _ in range(2))
        name = f"t{j}"
        size = math.prod(tensors[a].shape)
        if rng.random() < 0.3:  # a RESHAPE: to the planner, a new buffer of any size
            tensors[name] = _act(name, (int(rng.integers(1, 300)),))
            ops.append(Op("RESHAPE", [a], [name], {}))
        else:
            if math.prod(tensors[b].shape) != size:
                b = a
            tensors[name] = _act(name, (size,))
            ops.append(Op("ADD", [a, b], [name], {}))
        live.append(name)
    out = live[int(rng.integers(len(live)))]
    return Graph(tensors, ops, "x", out, "dag")


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs(seed):
    g = random_dag(np.random.default_rng(seed))
    check_plan(g)
    lives = _lives(g)
    assert lives[g.output][1] == len(g.ops)


def test_graph_output_lives_to_the_end_and_unread_outputs_die_at_birth():
    t = {n: _act(n, (20,)) for n in ("x", "a", "b", "c")}
    ops = [Op("ADD", ["x", "x"], ["a"], {}), Op("ADD", ["x", "x"], ["b"], {})]
    ops.append(Op("ADD", ["b", "b"], ["c"], {}))
    g = Graph(t, ops, "x", "a")
    lives = _lives(g)
    assert lives == {"x": (0, 1), "a": (0, 3), "b": (1, 2), "c": (2, 2)}
    bufs = {b.tensor: b.offset for b in check_plan(g)}
    # x [0,1] at 0, a [0,3] at 32, b [1,2] above both, c [2,2] where x was
    assert bufs == {"x": 0, "a": 32, "b": 64, "c": 0}
    assert plan.act_bytes(g) == 96


def test_zero_ops():
    g = Graph({"x": _act("x", (7,))}, [], "x", "x")
    assert plan.lives(g) == [("x", 7, 0, 0)]
    assert plan.act_bytes(g) == 16
