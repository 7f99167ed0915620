"""benchmarks/bench_memory.py counts what the firmware holds, and a ZO step with the int8
master stays within 1.1x of inference memory (issue 11, section 6) by those counts: for each
master, a model whose blob, activations and ZO work area (the benchmark's figures) fill the
SIL's arena to the byte loads, and with 16 bytes less it is refused MODEL_TOO_LARGE; the
static RAM comes from the Cortex-M55 build."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_memory as bm

from hilbench.backend.sil import SilBackend
from hilbench.errors import DeviceError
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.protocol import spec
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables
from tests.needs import need_tool


@pytest.fixture
def m55_cc() -> str:
    """The Cortex-M55 cross compiler: missing, the test fails saying what to install."""
    return need_tool(bm.M55_CC, "apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi")


needs_m55 = pytest.mark.usefixtures("m55_cc")


def _blob(name: str, kw: dict, master: str) -> bytes:
    g = zoo.build(name, seed=0, **kw)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0])).to_bytes()
    cfg = zocf.build(g).replace(master=master)
    return to_blob(g, {"LOSS": tables, "ZOCF": cfg.to_bytes()})


def _fits_to_the_byte(sil_path: Path, mem: bm.ModelMemory, blob: bytes, master: str) -> None:
    """The SIL loads the model in an arena of blob + activations + ZO work area and refuses it,
    with the declared text, in 16 bytes less."""
    assert zocf.pad16(len(blob)) == mem.blob
    need = mem.blob + mem.act + mem.work[master]
    with SilBackend(str(sil_path), None, "--arena-bytes", str(need)) as t:
        t.load_model(blob)  # fits to the byte
    work, zo = mem.act + mem.work[master], mem.work[master]
    text = spec.MESSAGES["MODEL_MEMORY"] % (work, mem.act, zo, work - 16, need - 16)
    with (
        SilBackend(str(sil_path), None, "--arena-bytes", str(need - 16)) as t,
        pytest.raises(DeviceError, match="MODEL_TOO_LARGE.*" + re.escape(text)),
    ):
        t.load_model(blob)


@pytest.mark.parametrize(("label", "name", "kw"), bm.MODELS[:2], ids=["mlp", "cnn"])
def test_the_arena_a_step_needs_is_the_firmwares(label, name, kw, sil_path):
    mem = bm.model_memory(label, name, kw)
    g = zoo.build(name, seed=0, **kw)
    trained = zocf.resolve(zocf.build(g), g)
    n = len(trained)  # every weight tensor: 2 on the MLP, 3 on the CNN
    rows = {"mlp": 64, "cnn": 256}[name]  # the longest trained row (fc0 / the FC's input)
    # the int8 work area: the row buffer, 2 Rademacher deltas, the tensors' records and scales
    assert mem.row == rows and n == {"mlp": 2, "cnn": 3}[name]
    assert mem.work["int8"] == rows + 16 + zocf.pad16(32 * n) + zocf.pad16(4 * n)
    assert mem.work["int16"] == mem.work["int8"] + sum(zocf.pad16(2 * t.size) for t in trained)
    for master in ("int8", "int16", "q16"):
        _fits_to_the_byte(sil_path, mem, _blob(name, kw, master), master)


def test_mobilenet_int8_arena_is_the_firmwares(sil_path):
    """MobileNetV2 (alpha 0.35, 32x32) trains depthwise filters with fresh samples: its work
    area has the row stream's block cache too."""
    label, name, kw = bm.MODELS[2]
    mem = bm.model_memory(label, name, kw)
    assert mem.parts["row_cache"] == 640 and mem.parts["row_buffer"] == 1280
    _fits_to_the_byte(sil_path, mem, _blob(name, kw, "int8"), "int8")


@needs_m55
def test_static_ram_is_measured_on_the_m55_build():
    st = bm.core_static()
    assert "arm-none-eabi-gcc" in st.compiler
    # the ZO code's statics: the last PROBE's seeds (4 B x 510), one perturbed pass's state and
    # the PROBE's two 16-entry memos (claims, the copy's tensors: 192 B); nothing sized by q,
    # the batch or the model besides (they were 22.6 KiB)
    assert 2040 <= st.zo < 3.5 * 1024
    assert st.protocol > 3 * 4096  # receive buffer, response body, cache of max_payload 4096
    assert st.graph > 0 and st.image > st.protocol  # code is larger than the buffers


@needs_m55
def test_an_int8_step_is_within_1_1x_of_inference_on_the_small_models(sil_path):
    """The target of issue 11 s6, in the benchmark's accounting (blob + activations + the
    core's static RAM for inference; plus the ZO work area and the ZO code's statics for a
    step), on the models whose arena the tests above prove; bench_memory.py prints every zoo
    model."""
    st = bm.core_static()
    for label, name, kw in bm.MODELS[: bm.SMALL]:
        mem = bm.model_memory(label, name, kw)
        inference, step = mem.inference(st), mem.step(st, "int8")
        assert step == inference + mem.work["int8"] + st.zo
        assert step <= 1.1 * inference, f"{label}: {step / inference:.3f}x"
    missed = bm.print_memory([bm.model_memory(*bm.MODELS[0])], st)
    assert missed == []
