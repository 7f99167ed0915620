"""`hilbench doctor` and `hilbench cache info|clear`, run as a user runs them."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np

from hilbench.data import cache
from tests.cli_helpers import ROOT, hilbench


def _run(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "hilbench", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env=env,
    )


def test_doctor_names_what_this_machine_has_per_backend(tmp_path):
    proc = hilbench("doctor", "--trace-dir", str(tmp_path / "traces"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for section in ("emulate:", "sil:", "qemu:", "board:", "farm:", "data:", "disk:"):
        assert any(line.startswith(section) for line in out.splitlines()), section
    rows = {r["what"]: r for r in json.loads(hilbench("doctor", "--json").stdout)}
    assert rows["Python package numpy"]["found"] == np.__version__
    assert rows["the compiled NPU engine"]["ok"]
    assert rows["the compiled framing (host per-step frames)"]["ok"]
    if shutil.which("qemu-system-arm"):
        assert rows["qemu-system-arm (mps3-an547)"]["found"].startswith("QEMU emulator version")
    disk = rows["free space where traces go"]
    free = shutil.disk_usage(tmp_path).free / 2**30
    assert abs(float(disk["found"].split(": ")[1].split(" GiB")[0].replace(",", "")) - free) < 1


def test_a_missing_tool_is_named_with_its_install_line(tmp_path):
    bin_dir = tmp_path / "bin"  # a PATH with Python only: no gcc, no QEMU, no make
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python")
    env = {**os.environ, "PATH": str(bin_dir), "LG_COORDINATOR": "10.0.0.1:20408"}
    proc = _run("doctor", env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "MISS gcc: not on PATH\n         fix: sudo apt-get install gcc" in out
    assert "MISS arm-none-eabi-gcc: not on PATH" in out
    assert "fix: sudo apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi" in out
    assert "MISS qemu-system-arm (mps3-an547)" in out
    assert "fix: sudo apt-get install qemu-system-arm" in out
    assert "ok   $LG_COORDINATOR: 10.0.0.1:20408" in out
    assert "sil: --sil (the firmware built for this host) — something is missing" in out


def test_cache_info_and_clear(tmp_path):
    env = {**os.environ, "HILBENCH_CACHE": str(tmp_path / "cache")}
    empty = json.loads(_run("cache", "info", "--json", env=env).stdout)
    assert empty == {**empty, "exists": False, "files": 0, "bytes": 0, "writable": True}
    os.environ["HILBENCH_CACHE"] = env["HILBENCH_CACHE"]
    try:
        cache.cached("data", "a", lambda: {"x": np.zeros(1000, np.int32)})
        cache.cached("pretrained", "b", lambda: {"y": np.ones(10)})
    finally:
        del os.environ["HILBENCH_CACHE"]
    full = json.loads(_run("cache", "info", "--json", env=env).stdout)
    assert full["files"] == 2 and full["bytes"] > 4000
    assert set(full["kinds"]) == {"data", "pretrained"}
    text = _run("cache", "info", env=env).stdout
    assert "2 entries" in text and "data: 1 entries" in text
    cleared = _run("cache", "clear", env=env)
    assert cleared.returncode == 0 and "2 entries" in cleared.stdout
    assert json.loads(_run("cache", "info", "--json", env=env).stdout)["files"] == 0
    assert not list((tmp_path / "cache").rglob("*.npz"))
