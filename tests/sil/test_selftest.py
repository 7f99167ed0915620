"""``hilbench selftest --sil`` end to end on the real SIL, and the SIL's staged uploads (issue 24):
DEVICE_INFO, LOAD_STAGE / LOAD_COMMIT written through /proc/PID/mem, against the twin's."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib

import numpy as np
import pytest

from hilbench.backend.emulate import EmulatorBackend
from hilbench.backend.sil import SilBackend
from hilbench.board.procmem import ProcessMemory
from hilbench.board.stage import DebugStager
from hilbench.client.device_client import Stager
from hilbench.device import DeviceTwin
from hilbench.errors import DeviceError
from hilbench.protocol import data_blob, spec
from hilbench.selftest import FAIL, NOT_APPLICABLE, PASS, open_backend, run_selftest


def test_selftest_on_the_sil_reports_what_applies(sil_path, tmp_path):
    report = run_selftest(open_backend("sil", None, str(sil_path)), clock_seconds=0.5)
    status = {c.name: c.status for c in report.checks}
    assert status == {
        "connect": PASS,
        "banner": NOT_APPLICABLE,
        "device info": PASS,
        "round trips": PASS,
        "clock": NOT_APPLICABLE,  # the SIL reports timing source none
        "arena": PASS,
        "forward pass": NOT_APPLICABLE,
        "zo step": NOT_APPLICABLE,
        "uart errors": NOT_APPLICABLE,
    }
    assert report.hello["device_id"] == "hilbench-sil"
    assert "CAP_DEVICE_INFO" in report.hello["capability_names"]
    assert report.device_info["arena_bytes"] == spec.DEFAULT_ARENA_BYTES
    assert report.device_info["arena_base"] > 0  # a real address in the SIL's memory
    arena = report.check("arena").figures
    # the whole arena but the pattern blob's last 256-byte item: written through the SIL's
    # memory, read back by the device's CRC-32
    assert spec.DEFAULT_ARENA_BYTES - 256 - 16 < arena["bytes"] <= spec.DEFAULT_ARENA_BYTES
    assert arena["via"].startswith("/proc/")
    trips = report.check("round trips").figures
    assert trips["n"] == 50 and 0 < trips["median_ms"] <= trips["p95_ms"] <= trips["max_ms"]
    step = report.check("zo step").figures
    assert step["modeled_forward_seconds"] > 0 and step["device_duration"] == 0
    path = tmp_path / "report.json"
    report.write_json(path)
    saved = json.loads(path.read_text())
    assert saved["result"] == PASS and saved["format"] == "hilbench-selftest/1"
    assert [c["name"] for c in saved["checks"]] == [c.name for c in report.checks]


def test_selftest_command_writes_the_report_and_the_summary(sil_path, tmp_path):
    out = tmp_path / "st.json"
    done = subprocess.run(
        [sys.executable, "-m", "hilbench", "selftest", "--sil", "--fw", str(sil_path),
         "--json", str(out), "--clock-seconds", "0.5"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "PASS  arena" in done.stdout
    assert "checks: 4 pass, 0 fail, 5 not applicable" in done.stdout
    assert json.loads(out.read_text())["backend"] == "sil"


def test_selftest_that_cannot_connect_fails_one_check(tmp_path):
    report = run_selftest(open_backend("sil", None, str(tmp_path / "missing-sil")))
    assert [(c.name, c.status) for c in report.checks] == [("connect", FAIL)]
    assert report.checks[0].fix


def test_bad_clock_seconds_is_one_line(sil_path):
    done = subprocess.run(
        [sys.executable, "-m", "hilbench", "selftest", "--sil", "--clock-seconds", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--clock-seconds 0 is out of range" in done.stderr and "Traceback" not in done.stderr


class _TwinStager(Stager):
    def __init__(self, twin: DeviceTwin) -> None:
        self.twin = twin

    def write(self, address, data, progress=None):
        self.twin.debug_write(address, data)


def _sil_stager(backend: SilBackend) -> DebugStager:
    pid = backend.process.pid
    return DebugStager(lambda: ProcessMemory(pid), name="sil", halt=False)


def test_staged_uploads_on_the_sil_match_the_twin(sil_path):
    """The same model and data through LOAD_STAGE / LOAD_COMMIT: the same model CRC, the same
    weights after the same steps, as the twin's and as the UART path's."""
    from hilbench.config import RunConfig
    from hilbench.train.prepare import load_data, prepare_model

    config = RunConfig(model="mlp", dataset="digits")
    data = load_data(config)
    model = prepare_model(config, data)
    x = np.clip(np.round(data.x_train[:64] * 127), -128, 127).astype(np.int8)
    blob = data_blob.encode(x.reshape(64, -1), data.y_train[:64], data.n_classes)
    seeds = np.array([11, 12, 13], dtype=np.uint32)
    results = []
    twin = DeviceTwin()
    sil = SilBackend(str(sil_path))
    for name, backend, stager in (
        ("twin", EmulatorBackend(twin), lambda b: _TwinStager(twin)),
        ("sil staged", sil, _sil_stager),
        ("sil uart", SilBackend(str(sil_path)), None),
    ):
        with backend as client:
            if stager is not None:
                client.stager = stager(backend)
            crc = client.load_model(model.blob)
            n = client.load_data_blob(0, blob)
            probe = client.probe(slot=0, batch_size=16, batch_seed=5, eps=2, seeds=seeds)
            client.apply(seeds, np.array([3, -2, 1], dtype=np.int32))
            results.append((name, crc, n, probe.loss_plus.tolist(), client.weights_crc()))
            assert client.stats.get("staged_bytes", 0) == (
                0 if stager is None else len(model.blob) + len(blob)
            )
    assert results[0][1:] == results[1][1:] == results[2][1:], results


def test_a_commit_whose_bytes_did_not_land_is_refused_alike(sil_path):
    """No debugger wrote anything: the twin and the SIL refuse the commit with the same
    message, and a commit with nothing staged too."""
    from hilbench.protocol import messages as m

    answers = []
    for backend in (EmulatorBackend(DeviceTwin()), SilBackend(str(sil_path))):
        with backend as client:
            stage = client._exchange(m.LoadStageRequest(target=1, total_len=100))
            texts = [stage.offset]
            for request in (
                m.LoadCommitRequest(target=1, total_len=100, crc32=zlib.crc32(b"x" * 100)),
                m.LoadCommitRequest(target=1, total_len=99, crc32=0),
                m.LoadCommitRequest(target=2, total_len=100, crc32=0),
            ):
                with pytest.raises(DeviceError) as err:
                    client._exchange(request)
                texts.append(err.value.cause.split(": ", 1)[1])
            answers.append(texts)
    assert answers[0] == answers[1]
    assert answers[0][0] == spec.DEFAULT_ARENA_BYTES - 112  # slot 1 stacked from the top
    assert "the 100 staged bytes have CRC-32 0x" in answers[0][1]
    assert "no staged upload for target 2" in answers[0][3]
