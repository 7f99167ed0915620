"""``hilbench selftest --qemu`` end to end on the real firmware under QEMU, and staged uploads
through QEMU's GDB stub (issue 24): the same weights as the UART path, in a fraction of its
time."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from hilbench.backend.qemu import QemuBackend
from hilbench.config import RunConfig
from hilbench.errors import ConfigError
from hilbench.protocol import spec
from hilbench.selftest import NOT_APPLICABLE, PASS, run_selftest


def test_selftest_on_qemu_reports_what_applies(an547_elf, tmp_path):
    report = run_selftest(QemuBackend(str(an547_elf), upload="probe"), clock_seconds=0.5)
    status = {c.name: c.status for c in report.checks}
    assert status == {
        "connect": PASS,
        "banner": PASS,
        "device info": PASS,
        "round trips": PASS,
        "clock": NOT_APPLICABLE,  # -icount: the counter counts instructions
        "arena": PASS,
        "forward pass": PASS,
        "zo step": PASS,
        "uart errors": PASS,
    }, report.summary()
    banner = report.check("banner").figures
    assert banner["timing"] == "instructions" and banner["arena_bytes"] == spec.DEFAULT_ARENA_BYTES
    info = report.device_info
    assert info["cpu_hz"] == 32_000_000 and info["uart_baud"] == 115_200
    assert info["timing_source"] == spec.TimingSource.INSTRUCTIONS
    assert info["arena_base"] == 0x21000000  # ISRAM0, where the an547 firmware puts the arena
    assert "instructions" in report.check("clock").detail
    assert report.check("clock").figures["ticks_per_host_second"] > 0
    arena = report.check("arena").figures
    assert arena["via"].startswith("the GDB stub")
    assert spec.DEFAULT_ARENA_BYTES - 256 - 16 < arena["bytes"] <= spec.DEFAULT_ARENA_BYTES
    forward = report.check("forward pass").figures
    assert 0.75 <= forward["ratio"] <= 1.33  # executed against modeled instructions
    step = report.check("zo step").figures
    assert step["device_duration"] >= step["forward_part"] > 0
    assert report.check("uart errors").figures["totals"] == {
        "uart_overrun": 0, "uart_framing": 0, "uart_noise": 0, "uart_dropped": 0,
    }  # fmt: skip
    path = tmp_path / "r.json"
    report.write_json(path)
    assert json.loads(path.read_text())["result"] == PASS


def _upload(an547_elf, upload: str, blob: bytes, data: bytes) -> tuple[float, tuple, int]:
    with QemuBackend(str(an547_elf), upload=upload) as client:
        t0 = time.perf_counter()
        model_crc = client.load_model(blob)
        client.load_data_blob(0, data)
        seconds = time.perf_counter() - t0
        seeds = np.array([3, 4], dtype=np.uint32)
        client.probe(slot=0, batch_size=8, batch_seed=9, eps=2, seeds=seeds)
        client.apply(seeds, np.array([2, -1], dtype=np.int32))
        return seconds, (model_crc, client.weights_crc()), client.stats.get("staged_bytes", 0)


def test_probe_uploads_leave_the_weights_of_the_uart_path(an547_elf):
    """The same model and data over the UART and through QEMU's GDB stub: the same model CRC
    and the same weights after a step; the probe path is several times faster."""
    from hilbench import data as datasets
    from hilbench.protocol import data_blob
    from hilbench.train.prepare import load_data, prepare_model

    config = RunConfig(model="mlp", dataset="digits")
    d = load_data(config)
    model = prepare_model(config, d)
    x = datasets.quantize_inputs(d.x_train, model.input_scale, model.input_zero_point)
    data = data_blob.encode(x, d.y_train, d.n_classes)
    uart_s, uart, uart_staged = _upload(an547_elf, "uart", model.blob, data)
    probe_s, probe, probe_staged = _upload(an547_elf, "probe", model.blob, data)
    assert probe == uart
    assert (uart_staged, probe_staged) == (0, len(model.blob) + len(data))
    # ~120 KiB: the UART takes seconds at QEMU's ~17 KiB/s, the stub a fraction of one
    assert probe_s * 3 < uart_s, (probe_s, uart_s)


def test_probe_upload_needs_a_debugger():
    with pytest.raises(ConfigError, match="--upload probe needs a debugger"):
        RunConfig(backend="sil", upload="probe")
    done = subprocess.run(
        [sys.executable, "-m", "hilbench", "run", "--upload", "probe", "--budget", "10"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--upload probe needs a debugger, and the emulate backend has none" in done.stderr
