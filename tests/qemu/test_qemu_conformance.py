"""The held-out conformance models that the emulator and the SIL run byte-exact
(tests/npu/test_conformance.py) on the firmware under QEMU (Cortex-M55, mps3-an547): a subset
chosen so the emulated UART stays within a minute, with every shape of model a device refused
before (weightless, an output of 6,144 elements, an input of 76,800 bytes)."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.inference import infer_on_device
from tests.npu.conformance import QEMU_SUBSET, held_out_models
from tests.npu.test_conformance import tflm

SUBSET = [m for m in held_out_models() if m[0] in QEMU_SUBSET]


def test_the_subset_is_all_there():
    assert sorted(m[0] for m in SUBSET) == sorted(QEMU_SUBSET)


@pytest.mark.parametrize(("name", "g", "x"), SUBSET, ids=[m[0] for m in SUBSET])
def test_held_out_model_is_byte_exact_under_qemu(an547_elf, name, g, x):
    want = tflm(g, x)
    got = infer_on_device(g, x, "qemu", firmware=str(an547_elf)).reshape(len(x), -1)
    bad = int(np.count_nonzero(got != want))
    assert bad == 0, f"{name} under QEMU: {bad} of {want.size} output bytes differ from TFLM"
