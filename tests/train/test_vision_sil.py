"""The C firmware (SIL build) fine-tunes a pre-trained vision model exactly as the twin does:
the same loss pairs, coefficients, evaluations and final weights."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench import session
from hilbench.config import RunConfig
from hilbench.launch.sil import sil_binary
from hilbench.trace import Trace


@pytest.fixture(scope="module")
def sil_path():
    return sil_binary()


@pytest.mark.parametrize(
    ("model", "width", "init"),
    [("resnet18", 0.125, "pretrained"), ("mobilenet_v2", 0.1, "random")],  # random: no pre-training
)
def test_sil_fine_tunes_like_the_twin(model, width, init, tmp_path, sil_path, monkeypatch):
    monkeypatch.setenv("HILBENCH_CACHE", str(tmp_path / "cache"))
    runs = {}
    for backend in ("emulate", "sil"):
        cfg = RunConfig(
            backend=backend,
            firmware=str(sil_path) if backend == "sil" else None,
            model=model,
            width=width,
            resolution=8,
            dataset="fashion-mnist-shift",
            init=init,
            layers="last:1",
            scheduler="qscheduler",
            budget=48,
            eval_every=24,
            lr=300.0,
            live=False,
            trace=tmp_path / f"{backend}.h5",
        )
        result = session.run(cfg)
        runs[backend] = (result, Trace.open(result.trace_path))
    (twin_result, twin), (sil_result, sil) = runs["emulate"], runs["sil"]
    assert len(sil.samples) == len(twin.samples) > 0
    for field in ("seed", "loss_plus", "loss_minus", "coeff"):
        np.testing.assert_array_equal(sil.samples[field], twin.samples[field], err_msg=field)
    np.testing.assert_array_equal(sil.evals["accuracy"], twin.evals["accuracy"])
    assert sil_result.weights_crc == twin_result.weights_crc
    assert twin.attrs["initial_weights_crc"] != twin_result.weights_crc
