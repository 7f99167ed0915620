"""The command line as a user meets it: results, and one clear line for each mistake."""

import json
import os
import socket
import subprocess
import sys
import threading

import h5py
import pytest

from tests.cli_helpers import default_steps, hilbench


def assert_one_clear_line(proc, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_run_then_report_json(tmp_path):
    trace = tmp_path / "run.h5"
    proc = hilbench("run", "--budget", "1200", "--seed", "2", "--no-live", "--trace", str(trace))
    assert proc.returncode == 0, proc.stderr
    assert "final test accuracy" in proc.stdout and str(trace) in proc.stdout
    report = json.loads(hilbench("report", str(trace), "--json").stdout)
    assert report["forward_passes"] == 1200 and report["steps"] == default_steps(1200)
    assert report["backend"] == "emulate"
    assert 0.0 <= report["final_accuracy"] <= 1.0
    assert isinstance(report["weights_crc"], int) and report["weights_crc"] > 0
    human = hilbench("report", str(trace))
    assert human.returncode == 0 and "PROBE" in human.stdout


def test_a_missing_serial_port_is_named(tmp_path):
    proc = hilbench("run", "--board", "/dev/ttyNOSUCH0", "--trace", str(tmp_path / "t.h5"))
    assert_one_clear_line(proc, "/dev/ttyNOSUCH0", "--emulate")


def test_nothing_answering_on_the_port_times_out_clearly(tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True)
    thread.start()
    try:
        proc = hilbench(
            "run", "--board", f"socket://127.0.0.1:{port}", "--trace", str(tmp_path / "t.h5")
        )
    finally:
        server.close()
    assert_one_clear_line(proc, "no answer", "HELLO", "firmware")


def test_a_refused_connection_is_named(tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    server.close()
    proc = hilbench(
        "run", "--board", f"socket://127.0.0.1:{port}", "--trace", str(tmp_path / "t.h5")
    )
    assert_one_clear_line(proc, f"socket://127.0.0.1:{port}", "hilbench emulate")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--model", "resnet9000"], ["unknown model 'resnet9000'", "mlp"]),
        (["--dataset", "imagenet"], ["unknown dataset 'imagenet'", "digits"]),
        (["--scheduler", "fixed:0"], ["fixed:0", "q in"]),
        (["--scheduler", "sometimes"], ["unknown scheduler"]),
        (["--budget", "-5"], ["budget"]),
        (["--eps", "500"], ["eps"]),
    ],
)
def test_bad_settings_are_refused_before_any_device_is_touched(tmp_path, args, needles):
    proc = hilbench("run", *args, "--trace", str(tmp_path / "t.h5"))
    assert_one_clear_line(proc, *needles)
    assert not (tmp_path / "t.h5").exists()


def test_an_unwritable_trace_path_is_named(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = hilbench("run", "--budget", "40", "--trace", str(blocker / "run.h5"))
    assert_one_clear_line(proc, str(blocker / "run.h5"))


def test_report_refuses_foreign_files(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert_one_clear_line(hilbench("report", str(text)), "not an HDF5 file")
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f["x"] = [1, 2, 3]
    assert_one_clear_line(hilbench("report", str(foreign)), "not a hilbench trace")
    assert_one_clear_line(hilbench("report", str(tmp_path / "missing.h5")), "missing.h5")


def test_emulate_refuses_a_malformed_listen_address():
    assert_one_clear_line(hilbench("emulate", "--listen", "nonsense"), "HOST:PORT")


def test_qemu_with_a_firmware_that_is_no_elf_is_one_clear_line(tmp_path):
    (tmp_path / "fw.bin").write_bytes(b"not an image")
    proc = hilbench(
        "run", "--qemu", "--fw", str(tmp_path / "fw.bin"), "--trace", str(tmp_path / "t.h5")
    )
    assert_one_clear_line(proc, "is not an ELF file", "device_fw")


def test_an_unknown_npu_backend_setting_is_the_users_mistake(tmp_path):
    env = {**os.environ, "HILBENCH_NPU_BACKEND": "fastest"}
    trace = tmp_path / "t.h5"
    proc = subprocess.run(
        [sys.executable, "-m", "hilbench", "run", "--budget", "40", "--trace", str(trace)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert_one_clear_line(proc, "HILBENCH_NPU_BACKEND='fastest'", "native, jit, numpy")
    assert not trace.exists()
    test = tmp_path / "test_x.py"
    test.write_text("def test_x(device):\n    assert device.info\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", str(test), "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert "HILBENCH_NPU_BACKEND='fastest' names no NPU backend" in proc.stdout + proc.stderr
