"""Issue 26 items 9 and 10: mistakes answered with their real cause, once, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hilbench.cli.infer import load_inputs
from hilbench.errors import HilbenchError

ROOT = Path(__file__).resolve().parents[2]


def hilbench(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "hilbench", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=cwd,
        timeout=120,
    )


def test_a_forgotten_socket_scheme_is_named_once(tmp_path):
    r = hilbench("run", "--board", "127.0.0.1:5555", "--budget", "100", cwd=tmp_path)
    assert r.returncode == 2
    assert "did you mean socket://127.0.0.1:5555" in r.stderr
    assert "probe id" not in r.stderr + r.stdout
    assert (r.stderr + r.stdout).count("127.0.0.1:5555 is a network address") == 1
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "spec", ["labgrid:rack-1", "map:boards.toml", "/dev/ttyACM0", "socket://h:5555", "0670FF"]
)
def test_board_specs_with_a_colon_of_their_own_are_kept(spec):
    from hilbench.config import RunConfig

    assert RunConfig(backend="board", port=spec).port == spec


def test_an_object_npy_says_what_kind_of_array_is_expected(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(HilbenchError) as e:
        load_inputs(path, (8, 8, 1))
    text = str(e.value)
    assert "Python objects (dtype object), not of numbers" in text
    assert "int8 of shape (N, 8, 8, 1)" in text
    assert "pickle" not in text


def test_a_bad_native_isa_is_refused_at_start(tmp_path):
    r = hilbench(
        "run", "--budget", "100", "--no-live", env={"HILBENCH_NPU_NATIVE_ISA": "foo"}, cwd=tmp_path
    )
    assert r.returncode == 2
    out = r.stdout + r.stderr
    assert "HILBENCH_NPU_NATIVE_ISA='foo' names no kernels of this build" in out
    assert "uploading" not in out and "EVAL" not in out  # before anything reached a device
    assert "bug in hilbench" not in out
    assert out.count("HILBENCH_NPU_NATIVE_ISA") == 1


@pytest.mark.parametrize("width", ["0", "-1", "9", "nan"])
def test_width_zero_is_refused_not_the_default(tmp_path, width):
    r = hilbench(
        "run", "--model", "mobilenet_v2", "--width", width, "--budget", "100", cwd=tmp_path
    )
    assert r.returncode == 2
    assert ("argument --width" in r.stderr and "0.05..4" in r.stderr) or "invalid width" in r.stderr
    assert "Traceback" not in r.stderr


def test_injected_resets_are_blamed_on_link_faults_not_the_power_supply():
    from hilbench.backend.emulate import EmulatorBackend
    from hilbench.client.recovery import RecoveringTarget
    from hilbench.errors import DeviceError
    from hilbench.link.faults import FaultSpec

    backend = EmulatorBackend(faults=FaultSpec(reset=1.0, seed=1))
    connection = backend.open()
    try:
        with pytest.raises(DeviceError) as e:
            RecoveringTarget(connection.client, max_in_a_row=2).weights_crc()
    finally:
        backend.close()
    assert "reset 3 times in a row" in e.value.cause
    assert "injected by --link-faults reset=1" in e.value.cause
    assert "power supply" not in str(e.value)
    assert "lower reset=" in (e.value.fix or "")


def test_an_unknown_probe_id_is_said_once(tmp_path):
    r = hilbench("run", "--board", "0670FF12", "--budget", "100", cwd=tmp_path)
    assert r.returncode == 2
    out = r.stdout + r.stderr
    assert out.count("no board with probe id '0670FF12'") == 1, out
    assert "absent -> loaded failed after" in out  # the move is still logged, without the text
