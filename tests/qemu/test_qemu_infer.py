"""``hilbench infer --qemu`` on a held-out .tflite (a CNN with weights no test trains): the
firmware on the Cortex-M55 computes what TFLM computes, byte for byte. (Every op kind is
checked against TFLM's vectors on the M55 by make an547-test; a MobileNetV2's 200+ KB of
weights would take the emulated UART tens of seconds.)"""

from __future__ import annotations

import numpy as np

from hilbench.npu import zoo
from hilbench.npu.tflite import export_tflite
from tests.cli_helpers import hilbench
from tests.npu.oracle import run_tflite


def test_infer_through_qemu_equals_tflm(tmp_path, an547_elf):
    g = zoo.build("cnn", seed=21)
    model = tmp_path / "cnn.tflite"
    model.write_bytes(export_tflite(g, 1))
    x = np.random.default_rng(5).integers(-128, 128, (16, *g.input_shape)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    r = hilbench(
        "infer",
        str(model),
        "--input",
        str(tmp_path / "x.npy"),
        "-o",
        str(tmp_path / "y.npy"),
        "--qemu",
        "--fw",
        str(an547_elf),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "y.npy")
    tflite = model.read_bytes()
    want = np.concatenate([run_tflite(tflite, x[i : i + 1]) for i in range(len(x))])
    assert y.dtype == np.int8 and y.shape == want.shape == (16, 10)
    np.testing.assert_array_equal(y, want)
    assert len({row.tobytes() for row in y}) > 1  # the outputs depend on the input
