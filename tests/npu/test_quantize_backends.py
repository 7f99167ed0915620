"""A float .tflite quantized by hilbench's own quantizer runs byte-exact with TFLM on every
backend: the emulator, the SIL firmware and the firmware under QEMU. Two float files: TFLM's own
sine model (the float .tflite the tflite_micro package ships, a real-world file hilbench did not
write) and a CNN written by hilbench's float writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hilbench.npu import nets, quantize_tflite
from hilbench.npu.tflite import export_tflite, import_tflite
from hilbench.validate import validate
from tests.needs import need_module

need_module("tflite_micro.tensorflow.lite.micro.compression.model_editor")


def _sine() -> bytes:
    import tflite_micro

    return (
        Path(tflite_micro.__file__).parent / "python/tflite_micro/sine_float.tflite"
    ).read_bytes()


def _quantized(name: str) -> tuple[bytes, np.ndarray]:
    if name == "sine":
        data = _sine()
        calib = np.random.default_rng(0).uniform(0, 2 * np.pi, (64, 1)).astype(np.float32)
    else:
        fm = nets.cnn(np.random.default_rng(3), (8, 16), 10, 8)
        data = quantize_tflite.export_float_tflite(fm)
        calib = np.random.default_rng(1).random((32, *fm.input_shape), dtype=np.float32)
    g = quantize_tflite.quantize_float_tflite(data, calib)
    x = np.random.default_rng(2).integers(-128, 128, (6, *g.input_shape)).astype(np.int8)
    return export_tflite(g), x


@pytest.fixture(scope="module", params=["sine", "cnn"])
def quantized(request):
    return request.param, *_quantized(request.param)


def test_the_sine_file_is_a_float_model_of_supported_ops():
    fm = quantize_tflite.import_float_tflite(_sine(), "sine_float.tflite")
    assert fm.input_shape == (1,)
    g = import_tflite(_quantized("sine")[0])
    assert [op.kind for op in g.ops] == ["FULLY_CONNECTED"] * 3


@pytest.mark.parametrize("backend", ["emulate", "sil", "qemu"])
def test_a_quantized_float_file_is_byte_exact_on(quantized, backend):
    name, model, x = quantized
    r = validate(model, x, backend=backend, name=f"{name}.tflite")
    assert (r.items, r.byte_equal) == (len(x), len(x)), (name, backend, r.worst)
    assert r.metrics.rmse == 0 and r.metrics.cos == pytest.approx(1.0)
