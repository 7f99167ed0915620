"""A real-world int8 .tflite with ops hilbench does not run (a MobileNetV2 whose ADDs became MUL
and whose MEAN became REDUCE_MAX, as another converter might emit them): every command refuses
it in one line naming each op and its position, before any op is read and before any device is
started, so nothing is half-loaded."""

from __future__ import annotations

import flatbuffers
import numpy as np
import pytest

from hilbench.errors import ModelError
from hilbench.npu import zoo
from hilbench.npu.tflite import export_tflite, import_tflite
from tests.cli_helpers import hilbench
from tests.needs import need_module

tfl = need_module("tflite_micro.tensorflow.lite.micro.python.schema_py_generated")


@pytest.fixture(scope="module")
def foreign(tmp_path_factory):
    g = zoo.build("mobilenet_v2", seed=0, alpha=0.35, resolution=32, classes=5)
    model = tfl.ModelT.InitFromPackedBuf(export_tflite(g, 1), 0)
    swap = {tfl.BuiltinOperator.ADD: tfl.BuiltinOperator.MUL}
    swap[tfl.BuiltinOperator.MEAN] = tfl.BuiltinOperator.REDUCE_MAX
    for code in model.operatorCodes:
        if code.builtinCode in swap:
            code.builtinCode = code.deprecatedBuiltinCode = swap[code.builtinCode]
    b = flatbuffers.Builder(0)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    path = tmp_path_factory.mktemp("m") / "foreign.tflite"
    path.write_bytes(bytes(b.Output()))
    np.save(path.parent / "x.npy", np.zeros((1, 32, 32, 3), np.int8))
    bad = [(i, "MUL" if op.kind == "ADD" else "REDUCE_MAX", op.outputs[0]) for i, op in
           enumerate(g.ops) if op.kind in ("ADD", "MEAN")]  # fmt: skip
    return path, bad, len(g.ops)


def test_the_import_names_every_op_and_position(foreign):
    path, bad, n = foreign
    assert len(bad) == 11
    with pytest.raises(ModelError) as e:
        import_tflite(path.read_bytes(), path.name)
    text = str(e.value)
    listed = ", ".join(f"layer {i} ({kind} -> '{out}')" for i, kind, out in bad)
    assert f"{path.name}: 11 unsupported ops of {n}: {listed}" in text
    assert "use only " in text and "\n" not in text


@pytest.mark.parametrize(
    "argv",
    [
        ["infer", "--input", "{x}", "--sil"],
        ["validate", "--input", "{x}", "--qemu"],
        ["analyze"],
        ["infer", "--input", "{x}"],
    ],
    ids=["infer-sil", "validate-qemu", "analyze", "infer-emulator"],
)
def test_every_command_refuses_it_in_one_line_before_a_device_starts(foreign, argv):
    path, bad, n = foreign
    x = str(path.parent / "x.npy")
    r = hilbench(argv[0], str(path), *[a.format(x=x) for a in argv[1:]])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"11 unsupported ops of {n}: layer {bad[0][0]} (MUL" in lines[0]
    assert f"layer {bad[-1][0]} (REDUCE_MAX" in lines[0] and r.stdout == ""
