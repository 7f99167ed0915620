"""No QEMU is left behind: after a session, on Ctrl-C, after a failed test, when pytest itself
is killed (SIGKILL: the kernel ends QEMU, PR_SET_PDEATHSIG), and pytest-xdist workers each run
their own QEMU on their own port."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hilbench.backend.qemu import QemuBackend
from tests.cli_helpers import ROOT, ctrl_c_reaches_the_child

GONE_S = 10.0  # how long QEMU may take to go


def _is_qemu(pid: int) -> bool:
    try:
        return b"qemu-system-arm" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _qemu_children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid and _is_qemu(int(entry.name)):
                found.append(int(entry.name))
    return found


def _gone(pids, timeout: float = GONE_S) -> bool:
    deadline = time.monotonic() + timeout
    while any(_is_qemu(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_closing_the_backend_stops_qemu(an547_elf):
    backend = QemuBackend(an547_elf)
    with backend:
        pid = backend.process.pid
        assert _is_qemu(pid)
    assert _gone([pid], 0.5)


def test_ctrl_c_on_hilbench_run_stops_qemu(tmp_path, an547_elf):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hilbench",
            "run",
            "--qemu",
            "--fw",
            str(an547_elf),
            "--no-live",
            "--budget",
            "1000000",
            "--trace",
            str(tmp_path / "t.h5"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_reaches_the_child,  # also when this pytest runs with SIGINT ignored
    )
    try:
        deadline = time.monotonic() + 60
        qemu = []
        while not qemu and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            qemu = _qemu_children(proc.pid)
        assert qemu, "hilbench run --qemu started no QEMU"
        time.sleep(3)  # training, or still uploading: either way QEMU must go
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert _gone(qemu), f"QEMU {qemu} survived Ctrl-C"


INNER = """
import json, os, time
from pathlib import Path

OUT = Path(os.environ["QEMU_PIDS"])

def _note(hil_backend, name):
    p = hil_backend.process
    part = OUT / (name + ".part")  # written, then renamed: a reader never sees half of it
    part.write_text(json.dumps({"pid": p.pid, "port": p.port}))
    part.rename(OUT / name)

def test_one(hil_backend, device):
    _note(hil_backend, "one")
    assert device.weights_crc is not None
    if os.environ.get("QEMU_HANG"):
        time.sleep(120)
    assert os.environ.get("QEMU_FAIL") is None, "this test fails on purpose"

def test_two(hil_backend):
    _note(hil_backend, "two")
"""


def _pytest(tmp_path: Path, elf: Path, *args: str, **env: str) -> subprocess.Popen:
    (tmp_path / "test_inner.py").write_text(INNER)
    pids = tmp_path / "pids"
    pids.mkdir(exist_ok=True)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--no-live",
            "--qemu",
            f"--fw={elf}",
            str(tmp_path / "test_inner.py"),
            *args,
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "QEMU_PIDS": str(pids), **env},
    )


def _noted(tmp_path: Path) -> dict[str, dict]:
    notes = (tmp_path / "pids").iterdir()
    return {p.name: json.loads(p.read_text()) for p in notes if p.suffix != ".part"}


def test_a_failed_test_leaves_no_qemu(tmp_path, an547_elf):
    proc = _pytest(tmp_path, an547_elf, QEMU_FAIL="1")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "1 failed, 1 passed" in out, out
    noted = _noted(tmp_path)
    assert noted["one"]["pid"] == noted["two"]["pid"]  # one QEMU for the session
    assert _gone([noted["one"]["pid"]], 1.0)


def test_killing_pytest_kills_qemu(tmp_path, an547_elf):
    proc = _pytest(tmp_path, an547_elf, "-k", "one", QEMU_HANG="1")
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "pids" / "one").exists():
            assert time.monotonic() < deadline and proc.poll() is None, proc.stdout.read()
            time.sleep(0.1)
        pid = _noted(tmp_path)["one"]["pid"]
        assert _is_qemu(pid)
        proc.kill()  # SIGKILL: no teardown, no finalizer runs
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _gone([pid]), f"QEMU {pid} outlived the pytest that started it"


def test_xdist_workers_each_run_their_own_qemu(tmp_path, an547_elf):
    proc = _pytest(tmp_path, an547_elf, "-n", "2")
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0 and "2 passed" in out, out
    noted = _noted(tmp_path)
    assert noted["one"]["pid"] != noted["two"]["pid"]
    assert noted["one"]["port"] != noted["two"]["port"]
    assert _gone([n["pid"] for n in noted.values()], 1.0)
