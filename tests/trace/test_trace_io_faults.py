"""A full disk or a failing disk at every write of a writer's life (SQLite/LMDB style).

``faults/io_faults.c`` (an LD_PRELOAD shim over the real libc) fails write call number N made
to the trace's directory (write, pwrite, fsync, fdatasync, ftruncate), and with ENOSPC every
later one too, as a full disk does; EIO fails that one call, as a flaky disk does. For every N
from the first write of create() to the last of the gzip rewrite at close, a child process
lives a writer's life (``faults/writer_life.py``: create, 30 steps flushed every 10, an eval
and an event, finish, close) and this test requires, each time:

- nothing but one TraceError escaped (no crash: the child exits 0, no other exception), and
  HDF5 holds no object of the file afterwards (it was closed, whatever failed);
- the file, if there is one, opens with the reader and holds whole steps 0..n-1 with the
  values appended (no zero rows, no empty event kinds), n at least the steps committed by
  the flushes that returned;
- a run that did not complete resumes and ends with all 30 steps, all intact.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.needs import need_tool

HERE = Path(__file__).parent / "faults"
STEPS = 30  # writer_life.STEPS


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = need_tool("gcc", "apt-get install gcc")
    out = tmp_path_factory.mktemp("shim") / "io_faults.so"
    cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-O1"]
    subprocess.run([*cmd, "-o", str(out), str(HERE / "io_faults.c"), "-ldl"], check=True)
    return out


def _lives(shim: Path, where: Path, err: int, sticky: bool) -> list[dict]:
    env = {**os.environ, "LD_PRELOAD": str(shim)}
    proc = subprocess.run(
        [sys.executable, str(HERE / "writer_life.py"), str(where), str(err), str(int(sticky))],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    lives = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, (
        f"the child died (exit {proc.returncode}) after {len(lives)} lives: {proc.stderr[-3000:]}"
    )
    assert proc.stderr == "", proc.stderr[-3000:]  # no traceback, no ignored exception
    return lives


@pytest.mark.parametrize(
    ("err", "sticky"), [(errno.ENOSPC, True), (errno.EIO, False), (errno.EIO, True)]
)
def test_an_io_error_at_every_write_leaves_a_whole_resumable_trace(
    shim: Path, tmp_path: Path, err: int, sticky: bool
) -> None:
    lives = _lives(shim, tmp_path, err, sticky)
    assert len(lives) >= 40  # every write of the life was failed once (50 of them today)
    assert lives[-1]["raised"] is None and lives[-1]["status"] == "complete"  # no fault left
    for life in lives:
        where = f"fault at write {life['n']}: {life}"
        assert "check_failed" not in life, where
        assert life["open_hdf5_files"] == 0, where  # the writer closed its file, whatever failed
        assert life["raised"] in (None, "TraceError"), where
        if life["raised"]:
            assert "\n" not in life["message"] and life["notes"] == [], where
            assert os.strerror(err) in life["message"], where
        if not life["exists"]:  # create() failed and removed the file it made
            assert life["raised"] == "TraceError" and life["committed"] == 0, where
            continue
        assert life["steps"] >= life["committed"], where
        if life["status"] == "complete":
            assert life["steps"] == STEPS, where
        else:
            assert life["resumed"] == STEPS and life["resumed_status"] == "complete", where
    assert any(life["raised"] for life in lives)
