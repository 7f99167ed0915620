"""APPLY_PROBE (each step's update sent with the next step's PROBE) computes what separate
APPLY and PROBE commands compute, in half the round trips."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench import session
from hilbench.config import RunConfig
from hilbench.device import DeviceTwin
from hilbench.device import device as twin_module
from hilbench.protocol import messages as m
from hilbench.trace import Trace


def run(tmp_path, name: str, twin: DeviceTwin, **kw):
    cfg = RunConfig(trace=tmp_path / f"{name}.h5", live=False, **kw)
    result = session.run(cfg, target=session.direct_target(twin))
    return result, Trace.open(result.trace_path, run=result.run_id)


@pytest.mark.parametrize(
    "settings",
    [
        {"budget": 800, "eval_every": 200},  # evaluations flush the held-back update
        {"budget": 700, "eval_every": 700, "scheduler": "qscheduler:min_window=20"},
    ],
)
def test_same_run_with_and_without_apply_probe(tmp_path, monkeypatch, settings):
    joined_twin = DeviceTwin()
    joined, tj = run(tmp_path, "joined", joined_twin, **settings)
    monkeypatch.setattr(twin_module, "CAPABILITIES", twin_module.CAPABILITIES & ~m.CAP_APPLY_PROBE)
    apart_twin = DeviceTwin()
    apart, ta = run(tmp_path, "apart", apart_twin, **settings)
    assert joined.weights_crc == apart.weights_crc
    assert joined.final_accuracy == apart.final_accuracy
    for column in ("seed", "loss_plus", "loss_minus", "coeff"):
        np.testing.assert_array_equal(tj.samples[column], ta.samples[column])
    np.testing.assert_array_equal(tj.evals["accuracy"], ta.evals["accuracy"])
    # one round trip per step instead of two (plus set-up, evaluations and the final APPLY)
    steps, evals = joined.steps, len(tj.evals)
    assert apart_twin.stats["frames"] - joined_twin.stats["frames"] >= steps - 1 - evals
    assert joined_twin.stats["frames"] < steps * 1.2 + 60
