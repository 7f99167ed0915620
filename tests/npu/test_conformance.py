"""The held-out int8 conformance models (tests/npu/conformance.py) byte-exact with TFLM on the
emulator and on the SIL firmware, through the same INFER path as ``hilbench infer --sil``:
weightless graphs, an output larger than a frame (read in parts), an input larger than a data
slot's item (sent in pieces). tests/qemu/test_qemu_conformance.py runs a subset on QEMU."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.inference import infer_on_device

from .conformance import held_out_models
from .oracle import graph_to_tflite, run_tflite

MODELS = held_out_models()


def tflm(g, x: np.ndarray) -> np.ndarray:
    """TFLM's outputs, one item at a time (the reference of ``hilbench validate``)."""
    model = graph_to_tflite(g, 1)
    return np.concatenate([run_tflite(model, x[i : i + 1]) for i in range(len(x))]).reshape(
        len(x), -1
    )


def test_the_set_covers_what_devices_refused():
    by_name = {name: g for name, g, _ in MODELS}
    assert len(MODELS) >= 12
    assert not by_name["weightless"].weight_tensors()
    assert int(np.prod(by_name["big_output"].output_shape)) == 6144  # > 4081: two parts
    assert int(np.prod(by_name["big_input"].input_shape)) == 76800  # > 65535 and > a frame


@pytest.mark.parametrize("backend", ["emulate", "sil"])
@pytest.mark.parametrize(("name", "g", "x"), MODELS, ids=[m[0] for m in MODELS])
def test_held_out_model_is_byte_exact_on(backend, name, g, x):
    want = tflm(g, x)
    got = infer_on_device(g, x, backend).reshape(len(x), -1)
    assert got.dtype == np.int8
    bad = int(np.count_nonzero(got != want))
    assert bad == 0, f"{name} on {backend}: {bad} of {want.size} output bytes differ from TFLM"
