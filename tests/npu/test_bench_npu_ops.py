"""benchmarks/bench_npu_ops.py times each op of a model alone: its one-op models must be
that op (the same output as inside the whole model), and ops of two activations have none."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.bench_npu_ops import alone
from hilbench.npu import zoo


@pytest.mark.parametrize(
    ("name", "kw"),
    [
        ("mobilenet_v2", {"alpha": 0.35, "resolution": 32}),
        ("resnet18", {"width": 0.25, "resolution": 32}),
    ],
)
def test_each_one_op_model_is_that_op(name, kw):
    g = zoo.build(name, seed=0, **kw)
    x = np.random.default_rng(3).integers(-128, 128, (2, *g.input_shape)).astype(np.int8)
    acts = {g.input: x, **g.run_all(x)}
    kinds_alone, two_inputs = set(), 0
    for i, op in enumerate(g.ops):
        sub = alone(g, i)
        if op.kind == "ADD":
            assert sub is None
            two_inputs += 1
            continue
        assert sub is not None and len(sub.ops) == 1 and sub.ops[0] is op
        np.testing.assert_array_equal(sub.run(acts[op.inputs[0]]), acts[op.outputs[0]])
        kinds_alone.add(op.kind)
    assert {"CONV_2D", "FULLY_CONNECTED", "MEAN"} <= kinds_alone
    assert two_inputs > 0  # the models' residual ADDs were met and refused
