"""The hybrid (issue 29, docs/zo-math.md section 11) on the C firmware: a run whose last layer
trains by HEAD_GRAD and the rest by ZO gives, on the SIL and on the twin, the same loss pairs,
coefficients, evaluations, weights CRC and head CRC; hilbench replay rebuilds both CRCs from
either trace, and a replay that skips the head's steps would not."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.trace.replay import replay
from tests.sil.test_sil_training import _run

CASES = [
    ("mlp", {"hybrid": "last", "head_lr": 2800.0}),
    ("mlp", {"hybrid": "last", "layers": "all", "rounding": "stochastic", "master": "int8"}),
    ("cnn", {"hybrid": "last", "head_lr": 700.0, "estimator": "one-sided"}),
]


@pytest.mark.parametrize(("model", "settings"), CASES, ids=lambda v: str(v))
def test_a_hybrid_run_is_the_same_on_the_firmware_and_the_twin(model, settings, tmp_path, sil_path):
    twin_result, twin = _run("emulate", model, settings, tmp_path, sil_path)
    sil_result, sil = _run("sil", model, settings, tmp_path, sil_path)
    assert len(sil.samples) == len(twin.samples) > 0
    for field in ("seed", "loss_plus", "loss_minus", "coeff"):
        np.testing.assert_array_equal(sil.samples[field], twin.samples[field], err_msg=field)
    np.testing.assert_array_equal(sil.evals["accuracy"], twin.evals["accuracy"])
    assert sil_result.weights_crc == twin_result.weights_crc
    head_crc = twin.attrs["head_crc"]
    assert sil.attrs["head_crc"] == head_crc
    # a step costs 2q ZO passes (q + 1 one-sided) and HEAD_GRAD's one
    q = int(twin.steps["q"][0])
    per_step = (q + 1 if settings.get("estimator") == "one-sided" else 2 * q) + 1
    assert twin.steps["forward_passes"][0] == per_step
    # the head moved: its initial CRC is not the final one
    from hilbench.device import ModelState

    assert ModelState.from_blob(twin.model_blob).head_crc() != int(head_crc) & 0xFFFFFFFF
    for trace in (twin, sil):
        result = replay(trace, head_data=_train_items(trace))
        assert result.matches, result.message()
        assert result.head_crc == int(head_crc) & 0xFFFFFFFF


def _train_items(trace):
    from hilbench import session

    return session.head_data(trace)
