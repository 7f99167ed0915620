"""The weights-CRC check against the host's shadow copy stops a diverging device."""

import numpy as np
import pytest

from hilbench.backend.emulate import EmulatorBackend
from hilbench.client.recovery import RecoveringTarget, WeightsDiverged
from hilbench.device import DeviceTwin, ModelState
from tests.link.soak import tiny_workload


class SloppyState(ModelState):
    """A device whose update rounds differently from the spec after 30 updates."""

    def apply(self, seeds, coeffs):
        super().apply(seeds, coeffs)
        if self.updates_applied == 30:
            name = self.trainable()[0] if callable(self.trainable) else self.trainable[0]
            w = self.graph.tensors[name].data
            w.flat[0] = np.int8(max(-127, int(w.flat[0]) - 1))


def train(device: RecoveringTarget, workload, steps: int) -> None:
    blob, x, y = workload
    device.load_model(blob)
    device.load_data(0, x, y, 10)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        seeds = rng.integers(0, 2**32, 2, dtype=np.uint32)
        device.probe(slot=0, batch_size=8, batch_seed=1, eps=2, seeds=seeds)
        device.apply(seeds, np.array([40000, -40000], np.int32))


def test_a_faithful_device_passes_every_check():
    with EmulatorBackend(link="memory") as target:
        device = RecoveringTarget(target, crc_every=10, shadow=ModelState.from_blob)
        train(device, tiny_workload(), 60)
        assert len(device.log.checkpoints) == 6


def test_a_device_that_rounds_differently_is_stopped_with_both_crcs(monkeypatch):
    monkeypatch.setattr("hilbench.device.device.ModelState", SloppyState)
    with EmulatorBackend(twin=DeviceTwin(), link="memory") as target:
        device = RecoveringTarget(target, crc_every=10, shadow=ModelState.from_blob)
        with pytest.raises(
            WeightsDiverged, match=r"after 30 updates .* CRC 0x[0-9a-f]{8}, the host expects 0x"
        ):
            train(device, tiny_workload(), 60)
