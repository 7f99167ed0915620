"""The README's sample test, unchanged, with ``pytest --qemu``: the firmware on the Cortex-M55
trains the MLP for 12,000 forward passes; every step's loss pairs and the final weights equal
the twin's on the same settings."""

from __future__ import annotations

import numpy as np

from hilbench import session
from hilbench.config import RunConfig
from hilbench.trace import Trace
from tests.cli_helpers import ROOT


def test_the_sample_test_passes_with_qemu_and_matches_the_twin(pytester, tmp_path, an547_elf):
    pytester.makeconftest("from threadpoolctl import threadpool_limits\nthreadpool_limits(1)\n")
    pytester.copy_example(str(ROOT / "tests" / "train" / "test_training.py"))
    traces = tmp_path / "traces"
    result = pytester.runpytest_subprocess(
        "--qemu",
        f"--fw={an547_elf}",
        f"--trace-dir={traces}",
        "--no-live",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
    (path,) = traces.glob("*.h5")
    qemu = Trace.open(path)
    assert qemu.attrs["backend"] == "qemu"
    assert set(qemu.timing["source"]) == {"host", "instr"}  # -icount: instructions, not time
    # the same run on the twin (the test's settings): identical, step by step
    config = RunConfig(
        budget=12_000, scheduler="fixed:4", seed=1, live=False, trace=tmp_path / "twin.h5"
    )
    twin = Trace.open(session.run(config).trace_path)
    assert len(qemu.samples) == len(twin.samples) == 12_000 // 2
    for field in ("seed", "loss_plus", "loss_minus", "coeff"):
        np.testing.assert_array_equal(qemu.samples[field], twin.samples[field], err_msg=field)
    assert qemu.weights_crc == twin.weights_crc
    np.testing.assert_array_equal(qemu.evals["accuracy"], twin.evals["accuracy"])
