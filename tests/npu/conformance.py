"""The held-out int8 conformance models: random graphs no test trains, drawn from seeds no other
test uses, that every backend must run byte-exact with TFLM (issue 27). Each is ``(name, graph,
x)`` with x (N, *input_shape) int8.

They cover every op kind of tests/npu/cases.py (one random case each), a model without weights
(pooling only), an output larger than a frame (6,144 elements), an input larger than a data
slot's 16-bit item size (76,800 bytes, an output of 4,800), and zoo models with weights (the
digits CNN, a small MobileNetV2 and an MLP).
"""

from __future__ import annotations

import numpy as np

from hilbench.npu import zoo
from hilbench.npu.graph import Graph, Op, QParams, Tensor
from hilbench.npu.ops import average_pool2d, max_pool2d

from .cases import CASES

HELD_OUT_SEED = 2727  # no other test draws from it


def _pools(name: str, in_shape, windows, seed: int, n: int = 2):
    """A chain of pooling ops (no weights) over (H, W, C) ``in_shape``: ``windows`` of
    (kind, kernel, stride, padding)."""
    rng = np.random.default_rng([HELD_OUT_SEED, seed])
    s, zp = float(np.float32(10 ** rng.uniform(-2, 0))), int(rng.integers(-100, 100))
    shape = tuple(in_shape)
    tensors = {"x": Tensor("x", shape, "int8", QParams([s], [zp]))}
    ops, prev = [], "x"
    for i, (kind, k, stride, padding) in enumerate(windows):
        mod = average_pool2d if kind == "avg" else max_pool2d
        p = mod.prepare(
            s,
            zp,
            "NONE",
            in_hw=shape[:2],
            filter_hw=(k, k),
            stride=(stride, stride),
            padding=padding,
        )
        shape = (p["out_h"], p["out_w"], shape[2])
        out = f"t{i}"
        tensors[out] = Tensor(out, shape, "int8", QParams([s], [zp]))
        ops.append(Op(mod.KIND, [prev], [out], p))
        prev = out
    g = Graph(tensors, ops, "x", prev, name)
    g.validate()
    x = rng.integers(-128, 128, (n, *in_shape)).astype(np.int8)
    return name, g, x


def _zoo(name: str, seed: int, n: int, **kw):
    g = zoo.build(name, seed=seed, **kw)
    x = np.random.default_rng([HELD_OUT_SEED, seed]).integers(-128, 128, (n, *g.input_shape))
    return f"{name}-{seed}", g, x.astype(np.int8)


def held_out_models() -> list[tuple[str, Graph, np.ndarray]]:
    models = []
    for kind in sorted(CASES):
        g, x = CASES[kind](np.random.default_rng([HELD_OUT_SEED, sorted(CASES).index(kind)]))
        models.append((kind, g, x))
    models.append(
        _pools("weightless", (12, 12, 4), [("avg", 2, 2, "SAME"), ("max", 3, 1, "VALID")], 1)
    )
    models.append(_pools("big_output", (32, 32, 6), [("max", 1, 1, "VALID")], 2))
    models.append(_pools("big_input", (160, 160, 3), [("avg", 4, 4, "VALID")], 3, n=1))
    models.append(_zoo("cnn", 27, 4))
    models.append(_zoo("mobilenet_v2", 27, 2, alpha=0.35, resolution=32, classes=5))
    models.append(_zoo("mlp", 27, 4))
    return models


# a subset small enough for QEMU's emulated UART: every kind of refusal the issue found
# (weightless, an output larger than a frame, an input larger than a slot item), an op with
# weights and a zoo model
QEMU_SUBSET = ("conv", "depthwise", "weightless", "big_output", "big_input", "cnn-27")
