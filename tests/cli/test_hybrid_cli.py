"""``hilbench run --hybrid last`` as a user meets it (issue 29): the run says the head's
memory, its trace keeps the head's CRC and the settings, ``hilbench replay`` rebuilds both
CRCs (and says MISMATCH when the head's does not match), and the hybrid's mistakes are one
clear line each."""

from __future__ import annotations

import json

import h5py

from tests.cli.test_cli import assert_one_clear_line
from tests.cli_helpers import hilbench


def test_a_hybrid_run_replays_its_head_and_says_a_changed_one(tmp_path):
    trace = tmp_path / "h.h5"
    args = ("--budget", "900", "--seed", "4", "--hybrid", "last", "--head-lr", "2800")
    proc = hilbench("run", *args, "--no-live", "--trace", str(trace))
    assert proc.returncode == 0, proc.stderr
    assert "hybrid: fc1_w trains by HEAD_GRAD, 1,320 B of int32 accumulators" in (
        proc.stdout + proc.stderr
    )
    with h5py.File(trace) as f:
        run = f["runs"][sorted(f["runs"])[-1]]
        config = json.loads(run.attrs["config_json"])
        head_crc = int(run.attrs["head_crc"])
        assert run["steps"]["forward_passes"][-1] == 900  # 100 steps of 2 x 4 + 1 passes
    assert config["hybrid"] == "last" and config["head_lr"] == 2800.0
    ok = hilbench("replay", str(trace))
    assert ok.returncode == 0, ok.stderr
    assert f"head CRC 0x{head_crc & 0xFFFFFFFF:08x}" in ok.stdout
    with h5py.File(trace, "r+") as f:
        run = f["runs"][sorted(f["runs"])[-1]]
        run.attrs["head_crc"] = (head_crc ^ 1) & 0xFFFFFFFF
    bad = hilbench("replay", str(trace))
    assert bad.returncode == 1 and "replay MISMATCH" in bad.stderr and "head CRC" in bad.stderr
    with h5py.File(trace, "r+") as f:  # as a run killed before its end leaves its trace
        run = f["runs"][sorted(f["runs"])[-1]]
        run.attrs["status"], run.attrs["finished"] = "interrupted", False
    resumed = hilbench("run", "--resume", str(trace))
    assert_one_clear_line(resumed, "hybrid run", "cannot be resumed")


def test_the_hybrids_mistakes_are_one_clear_line(tmp_path):
    only_head = hilbench(
        "run", "--hybrid", "last", "--layers", "fc1_*", "--trace", str(tmp_path / "a.h5")
    )
    assert_one_clear_line(only_head, "selects only the last layer", "--layers weights")
    unknown = hilbench("run", "--hybrid", "first", "--trace", str(tmp_path / "b.h5"))
    assert_one_clear_line(unknown, "hybrid", "first")
    assert not (tmp_path / "a.h5").exists() and not (tmp_path / "b.h5").exists()


def test_a_device_reset_stops_a_hybrid_run_and_says_why(tmp_path):
    """The host's recovery replays the ZO updates only: HEAD_GRAD's count then falls behind
    the steps sent, and the run stops naming it (it does not go on with a reset head)."""
    trace = tmp_path / "r.h5"
    proc = hilbench(
        "run", "--hybrid", "last", "--link-faults", "reset=0.02,seed=1", "--budget", "900",
        "--no-live", "--trace", str(trace),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "it lost the hybrid head's updates" in proc.stderr and "Traceback" not in proc.stderr
