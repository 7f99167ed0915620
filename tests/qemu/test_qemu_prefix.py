"""The frozen prefix and the perturbed copy on the Cortex-M55 (issue 25): a --layers run under
QEMU ends with the weights of main before them (the same CRC as tests/sil/test_prefix.py's on
the twin and the SIL)."""

from __future__ import annotations

from hilbench import session
from hilbench.config import RunConfig

# `python -m hilbench run --no-live --model cnn --layers last:1 --budget 1280 --seed 5` at
# main 9f02333 (before the PROBE's scratch), on the twin
MAIN_CNN_LAST1_CRC = 0xEA9027E2


def test_cnn_head_only_run_gives_mains_weights_under_qemu(tmp_path, an547_elf):
    config = RunConfig(
        backend="qemu",
        firmware=str(an547_elf),
        model="cnn",
        layers="last:1",
        budget=1280,
        scheduler="fixed:4",  # the schedule the CRC was recorded with
        lr=175.0,
        seed=5,
        live=False,
        trace=tmp_path / "qemu.h5",
    )
    result = session.run(config)
    assert result.backend == "qemu"
    assert result.weights_crc == MAIN_CNN_LAST1_CRC
