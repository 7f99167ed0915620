"""benchmarks/bench_memory.py counts what the firmware holds: for each master, a model whose
blob, activations and ZO work area (the benchmark's figures) fill the SIL's arena to the byte
loads, and with 16 bytes less it is refused MODEL_TOO_LARGE; the int8 master's work area is
the row buffer alone. The static RAM it reports comes from the Cortex-M55 build."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_memory as bm

from hilbench.backends import SilBackend
from hilbench.errors import DeviceError
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.protocol import spec
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables


@pytest.mark.parametrize(("label", "name", "kw"), bm.MODELS[:2], ids=["mlp", "cnn"])
def test_the_arena_a_step_needs_is_the_firmwares(label, name, kw, sil_path):
    mem = bm.model_memory(label, name, kw)
    g = zoo.build(name, seed=0, **kw)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0])).to_bytes()
    cfg = zocf.build(g)
    rows = {"mlp": 64, "cnn": 256}[name]  # the longest trained row (fc0 / the FC's input)
    assert mem.row == rows and mem.work["int8"] == rows
    assert mem.work["int16"] == 2 * mem.trained + rows + sum(
        zocf.pad16(2 * t.size) - 2 * t.size for t in zocf.resolve(cfg, g) if t.kind == "weight"
    )
    for master in ("int8", "int16", "q16"):
        blob = to_blob(g, {"LOSS": tables, "ZOCF": cfg.replace(master=master).to_bytes()})
        assert zocf.pad16(len(blob)) == mem.blob
        need = mem.blob + mem.act + mem.work[master]
        with SilBackend(str(sil_path), None, "--arena-bytes", str(need)) as t:
            t.load_model(blob)  # fits to the byte
        work, zo = mem.act + mem.work[master], mem.work[master]
        text = spec.MESSAGES["MODEL_MEMORY"] % (work, mem.act, zo, work - 16, need - 16)
        short = SilBackend(str(sil_path), None, "--arena-bytes", str(need - 16))
        with short as t, pytest.raises(DeviceError, match="MODEL_TOO_LARGE.*" + re.escape(text)):
            t.load_model(blob)


@pytest.mark.skipif(shutil.which(bm.M55_CC) is None, reason=f"{bm.M55_CC} not installed")
def test_static_ram_is_measured_on_the_m55_build():
    st = bm.core_static()
    assert "arm-none-eabi-gcc" in st.compiler
    # the ZO code's scratch: model.c's tables and chunk buffers, commands.c's q-sized arrays
    # (5 arrays of HB_MAX_Q = 510 words: 10,200 B)
    assert 10_200 < st.zo < 64 * 1024
    assert st.protocol > 3 * 4096  # receive buffer, response body, cache of max_payload 4096
    assert st.graph > 0 and st.image > st.protocol  # code is larger than the buffers
