"""``-o`` never destroys an input, never replaces a file without ``--force``, and is written
whole (issue 26, item 3): export, infer and quantize."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hilbench import session
from hilbench.backend.emulate import EmulatorBackend
from hilbench.config import RunConfig
from tests.cli_helpers import hilbench


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A trace, the model it exports and an input file for that model."""
    d = tmp_path_factory.mktemp("out")
    trace, model, x = d / "run.h5", d / "m.tflite", d / "X.npy"
    config = RunConfig(trace=trace, live=False, budget=80, seed=4)
    session.run(config, backend=EmulatorBackend(link="memory"))
    assert hilbench("export", str(trace), "-o", str(model)).returncode == 0
    np.save(x, np.zeros((3, 64), np.int8))
    return trace, model, x


def _refused(proc, *words: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    for w in words:
        assert w in proc.stderr, proc.stderr


def _digest(*paths: Path) -> list[bytes]:
    return [p.read_bytes() for p in paths]


def test_no_output_may_be_an_input(run, tmp_path) -> None:
    trace, model, x = run
    before = _digest(trace, model, x)
    _refused(hilbench("export", str(trace), "-o", str(trace), "--force"), "also an input")
    for o in (model, x):
        proc = hilbench("infer", str(model), "-i", str(x), "-o", str(o), "--force")
        _refused(proc, "also an input")
    link = tmp_path / "alias.tflite"
    link.symlink_to(model)  # the same file under another name
    proc = hilbench("quantize", str(link), "--data", "digits", "-o", str(model), "--force")
    _refused(proc, "also an input")
    assert _digest(trace, model, x) == before  # nothing was touched


def test_an_existing_file_is_replaced_only_with_force(run, tmp_path) -> None:
    trace, model, x = run
    keep = tmp_path / "keep.tflite"
    keep.write_bytes(b"precious")
    _refused(hilbench("export", str(trace), "-o", str(keep)), "already exists", "--force")
    ys = tmp_path / "Y.npy"
    ys.write_bytes(b"precious")
    _refused(hilbench("infer", str(model), "-i", str(x), "-o", str(ys)), "--force")
    assert keep.read_bytes() == ys.read_bytes() == b"precious"
    assert hilbench("export", str(trace), "-o", str(keep), "--force").returncode == 0
    assert keep.read_bytes() == model.read_bytes()
    assert hilbench("infer", str(model), "-i", str(x), "-o", str(ys), "--force").returncode == 0
    assert np.load(ys).shape[0] == 3
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left
