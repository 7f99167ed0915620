"""The hybrid (issue 29) on the Cortex-M55 under QEMU: a run whose last layer trains by
HEAD_GRAD and the rest by ZO ends with the twin's loss pairs, weights CRC and head CRC, and
HEAD_GRAD's durations are executed instructions (-icount), their own source."""

from __future__ import annotations

import numpy as np

from tests.qemu.test_qemu_training import _run


def test_a_hybrid_run_is_the_same_on_qemu_and_the_twin(tmp_path, an547_elf):
    settings = {"hybrid": "last", "head_lr": 2800.0, "budget": 360}
    twin_result, twin = _run("emulate", "mlp", settings, tmp_path, an547_elf)
    qemu_result, qemu = _run("qemu", "mlp", settings, tmp_path, an547_elf)
    for field in ("seed", "loss_plus", "loss_minus", "coeff"):
        np.testing.assert_array_equal(qemu.samples[field], twin.samples[field], err_msg=field)
    np.testing.assert_array_equal(qemu.evals["accuracy"], twin.evals["accuracy"])
    assert qemu_result.weights_crc == twin_result.weights_crc
    assert qemu.attrs["head_crc"] == twin.attrs["head_crc"]
    heads = qemu.timing[
        (qemu.timing["command"] == "HEAD_GRAD") & (qemu.timing["source"] == "instr")
    ]
    assert len(heads) == len(qemu.steps) == 40  # 360 passes, 9 a step
    assert heads["duration_s"].min() > 10_000  # a batch of 32 forward passes and the update
