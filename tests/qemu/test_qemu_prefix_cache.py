"""The prefix cache on the Cortex-M55 (core/model.c under QEMU): the sequence of
tests/sil/test_prefix_cache.py (entries made, read back across PROBEs and APPLYs, dropped when
a slot or the model is reloaded) answers as the twin without a cache, byte for byte."""

from __future__ import annotations

from hilbench.backend.emulate import EmulatorBackend
from hilbench.backend.qemu import QemuBackend
from hilbench.device import DeviceTwin
from tests.sil.test_prefix_cache import sequence


def test_the_firmwares_prefix_cache_answers_as_the_twin_without_one(an547_elf):
    reference = DeviceTwin()
    reference.prefix_cache = False
    with EmulatorBackend(reference) as twin:
        want = sequence(twin)
    with QemuBackend(an547_elf) as qemu:
        assert sequence(qemu) == want
