"""The aligned aggregator and the coupled QScheduler on the C firmware (issue 29): they change
only the host's coefficients, so the SIL and the twin give the same losses, coefficients and
final weights, and the coefficients differ from the mean's."""

from __future__ import annotations

import numpy as np
import pytest

from tests.sil.test_sil_training import _run

CASES = [
    ("mlp", {"aggregator": "align", "scheduler": "fixed:4", "lr": 40.0}),
    (
        "mlp",
        {
            "aggregator": "align",
            "scheduler": "qscheduler:q_min=2,couple=1,windows=4,min_steps=8,warmup=0",
            "layers": "all",
            "perturbation": "uniform",
            "lr": 40.0,
            "budget": 1280,
        },
    ),
    ("cnn", {"aggregator": "align", "scheduler": "fixed:8", "eps_per_channel": True, "lr": 20.0}),
]


@pytest.mark.parametrize(("model", "settings"), CASES, ids=lambda v: str(v))
def test_align_runs_the_same_on_the_firmware_and_the_twin(model, settings, tmp_path, sil_path):
    twin_result, twin = _run("emulate", model, settings, tmp_path, sil_path)
    sil_result, sil = _run("sil", model, settings, tmp_path, sil_path)
    for field in ("seed", "loss_plus", "loss_minus", "coeff"):
        np.testing.assert_array_equal(sil.samples[field], twin.samples[field], err_msg=field)
    assert sil_result.weights_crc == twin_result.weights_crc
    mean_result, mean = _run(
        "emulate", model, {**settings, "aggregator": "mean"}, tmp_path / "m", sil_path
    )
    assert not np.array_equal(mean.samples["coeff"], twin.samples["coeff"])
    assert mean_result.weights_crc != twin_result.weights_crc
