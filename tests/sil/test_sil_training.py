"""Firmware and twin are the same device (issue 11 s4): the same runs on both give the same
loss pairs at every step and the same final weights, over a matrix of ZO methods; MobileNetV2
(alpha 0.35, 32x32) is driven command by command through the same client.
"""

from __future__ import annotations

import numpy as np
import pytest

from hilbench import session
from hilbench.backend.emulate import EmulatorBackend
from hilbench.backend.sil import SilBackend
from hilbench.config import RunConfig
from hilbench.device import DeviceTwin
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.protocol import data_blob
from hilbench.trace import Trace
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables

#: the schedule these runs use unless a case sets its own: q = 4, so that every step holds
#: several samples (the aggregation, the per-sample rows); the weights CRCs pinned in this
#: directory were recorded with it (hilbench run's default was fixed:4 at lr 175 until the
#: widened study made it fixed:1 at lr 50)
SCHEDULE = {"scheduler": "fixed:4", "lr": 175.0}
#: ``hilbench run``'s own schedule and rate, one case of their own
DEFAULTS = {"scheduler": RunConfig().scheduler, "lr": RunConfig().lr}

# (model, settings): every distribution, the pool, the three masters, both roundings, both
# estimators, biases, per-channel eps and the QScheduler appear at least once.
MATRIX = [
    ("mlp", {}),
    ("mlp", DEFAULTS),
    ("mlp", {"perturbation": "gaussian", "layers": "all", "master": "int16"}),
    ("mlp", {"perturbation": "uniform", "pool": 256, "master": "int8", "rounding": "stochastic"}),
    ("mlp", {"estimator": "one-sided", "eps_per_channel": True, "scheduler": "qscheduler"}),
    ("cnn", {"eps_per_channel": True, "layers": "last:2"}),
    ("cnn", {"perturbation": "uniform", "pool": 512, "master": "int16", "eps": 3}),
]


def _run(backend: str, model: str, settings: dict, tmp_path, sil_path) -> tuple:
    config = RunConfig(
        backend=backend,
        firmware=str(sil_path) if backend == "sil" else None,
        model=model,
        budget=settings.get("budget", 640),
        eval_every=320,
        seed=5,
        live=False,
        trace=tmp_path / f"{backend}.h5",
        **{**SCHEDULE, **{k: v for k, v in settings.items() if k != "budget"}},
    )
    result = session.run(config)
    trace = Trace.open(result.trace_path)
    return result, trace


@pytest.mark.parametrize(("model", "settings"), MATRIX, ids=lambda v: str(v) or "default")
def test_same_losses_and_weights_as_the_twin(model, settings, tmp_path, sil_path):
    twin_result, twin = _run("emulate", model, settings, tmp_path, sil_path)
    sil_result, sil = _run("sil", model, settings, tmp_path, sil_path)
    assert sil_result.backend == "sil" and twin_result.backend == "emulate"
    assert len(sil.samples) == len(twin.samples) > 0
    for field in ("seed", "loss_plus", "loss_minus", "coeff"):
        np.testing.assert_array_equal(sil.samples[field], twin.samples[field], err_msg=field)
    assert sil_result.weights_crc == twin_result.weights_crc
    np.testing.assert_array_equal(sil.evals["accuracy"], twin.evals["accuracy"])
    assert sil_result.final_accuracy == twin_result.final_accuracy


def _mobilenet_blob(method: dict) -> tuple[bytes, int, int]:
    g = zoo.build("mobilenet_v2", seed=3, alpha=0.35, resolution=32, classes=10)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    cfg = zocf.build(g, **method)
    blob = to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()})
    return blob, int(np.prod(g.input_shape)), int(np.prod(g.output_shape))


MOBILENET_METHODS = [
    {"layers": "last:3"},
    {"distribution": "uniform", "pool_size": 2048, "per_channel": True, "master": "int8"},
    {"layers": "all", "distribution": "gaussian", "rounding": "stochastic", "master": "int16"},
]


@pytest.mark.parametrize("method", MOBILENET_METHODS, ids=lambda m: ",".join(m) or "default")
def test_mobilenet_v2_steps_match_command_by_command(method, sil_path):
    blob, item, classes = _mobilenet_blob(method)
    rng = np.random.default_rng(11)
    x = rng.integers(-128, 128, (12, item)).astype(np.int8)
    y = rng.integers(0, classes, 12).astype(np.uint8)
    data = data_blob.encode(x, y, classes)
    results = []
    for backend in (EmulatorBackend(DeviceTwin(modeled_timing=False)), SilBackend(str(sil_path))):
        with backend as target:
            target.load_model(blob)
            target.load_data_blob(0, data)
            steps = []
            rng = np.random.default_rng(21)
            prev = None
            for _ in range(4):
                seeds = rng.integers(0, 2**32, 2, dtype=np.uint64).astype(np.uint32)
                coeffs = rng.integers(-(2**18), 2**18, 2).astype(np.int32)
                batch = dict(slot=0, batch_size=3, batch_seed=int(rng.integers(2**32)), eps=2)
                if prev is None:
                    probe = target.probe(seeds=seeds, **batch)
                else:
                    _, probe = target.apply_probe(prev, coeffs, seeds=seeds, **batch)
                steps.append((probe.loss_plus.tolist(), probe.loss_minus.tolist()))
                prev = seeds
            target.apply(prev, np.array([4000, -4000], np.int32))
            crc = target.weights_crc()
            correct_loss = target.evaluate(0, 12)
            logits = [target.infer(slot=0, index=i).output.tolist() for i in (0, 5)]
            results.append((steps, crc, correct_loss, logits))
    twin, sil = results
    assert sil[0] == twin[0], "PROBE loss pairs differ"
    assert sil[1] == twin[1], "weights CRC after the updates differs"
    assert sil[2] == twin[2] and sil[3] == twin[3]
    assert len({tuple(p) for s in twin[0] for p in s}) > 1  # the losses do move
