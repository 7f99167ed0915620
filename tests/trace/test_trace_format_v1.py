"""Traces of format version 1 (steps without fresh_numbers): read, reported, resumed, appended.

Each test makes a real trace with a short run, then rewrites it with h5py into the version 1
layout (root format_version = 1, the steps table without its fresh_numbers column and unit).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from hilbench import session
from hilbench.config import RunConfig
from hilbench.console import NullView
from hilbench.errors import TraceError
from hilbench.trace import Follower, Trace, TraceWriter
from hilbench.trace.replay import replay
from tests.cli_helpers import hilbench
from tests.trace.test_trace_format_v2 import rewrite_as_v2

V2_ONLY = "fresh_numbers"


def rewrite_as_v1(path: Path) -> None:
    """Turn a trace into what hilbench wrote before format version 2 (its events too: as
    version 2 wrote them, test_trace_format_v2.py)."""
    rewrite_as_v2(path)
    with h5py.File(path, "r+", libver=("v110", "v110")) as f:
        f.attrs["format_version"] = 1
        for g in f["runs"].values():
            rows = g["steps"][()]
            units = json.loads(g["steps"].attrs["units"])
            description = g["steps"].attrs["description"]
            del units[V2_ONLY]
            v1 = np.dtype([(n, rows.dtype[n]) for n in rows.dtype.names if n != V2_ONLY])
            old = np.empty(len(rows), v1)
            for n in v1.names:
                old[n] = rows[n]
            del g["steps"]
            ds = g.create_dataset(
                "steps", data=old, maxshape=(None,), chunks=(256,), compression="gzip"
            )
            ds.attrs["units"] = json.dumps(units)
            ds.attrs["description"] = description


def config(path: Path, **kw) -> RunConfig:
    return RunConfig(trace=path, live=False, eval_every=100, scheduler="fixed:2", **kw)


def run(path: Path, **kw) -> session.RunResult:
    return session.run(config(path, **kw), target=session.direct_target())


class StopAfter(NullView):
    """Ctrl-C after ``n`` steps: the run is closed as interrupted, as from the keyboard."""

    def __init__(self, n: int) -> None:
        self.n = n

    def update(self, progress) -> None:
        if progress.step >= self.n:
            raise KeyboardInterrupt


def test_a_version_1_trace_reads_with_fresh_numbers_not_recorded(tmp_path):
    path = tmp_path / "v1.h5"
    run(path, budget=120)
    new = Trace.open(path)
    rewrite_as_v1(path)
    with h5py.File(path, "r") as f:
        assert V2_ONLY not in f["runs/0000/steps"].dtype.names
    old = Trace.open(path)
    assert old.format_version == 1
    assert old.steps.dtype == new.steps.dtype  # same columns as a version 2 run
    assert (old.steps[V2_ONLY] == -1).all() and (new.steps[V2_ONLY] > 0).all()
    for col in new.steps.dtype.names:
        if col != V2_ONLY:
            np.testing.assert_array_equal(old.steps[col], new.steps[col])
    assert old.summary() == new.summary()
    assert replay(old).matches
    follow = Follower(path).poll()
    assert follow.total_steps == old.n_steps and (follow.steps[V2_ONLY] == -1).all()


def test_a_version_1_trace_reports_cleanly(tmp_path):
    path = tmp_path / "v1.h5"
    run(path, budget=120)
    v2 = tmp_path / "v2.h5"
    shutil.copy(path, v2)
    rewrite_as_v1(path)
    for args in (["report", str(path)], ["report", str(path), "--json"], ["replay", str(path)]):
        proc = hilbench(*args)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stderr)
    a = json.loads(hilbench("report", str(path), "--json").stdout)
    b = json.loads(hilbench("report", str(v2), "--json").stdout)
    assert {k: v for k, v in a.items() if k != "path"} == {
        k: v for k, v in b.items() if k != "path"
    }
    proc = hilbench("compare", str(path), str(v2))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_a_version_1_run_resumes_in_its_own_layout_and_ends_like_an_uninterrupted_one(
    tmp_path,
):
    whole, cut = tmp_path / "whole.h5", tmp_path / "cut.h5"
    budget = 160
    full = run(whole, budget=budget)
    with pytest.raises(KeyboardInterrupt):
        session.run(config(cut, budget=budget), target=session.direct_target(), view=StopAfter(15))
    assert Trace.open(cut).status == "interrupted"
    rewrite_as_v1(cut)

    proc = hilbench("run", "--resume", str(cut))  # what a user types; the pty emulator
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    with h5py.File(cut, "r") as f:
        assert int(f.attrs["format_version"]) == 1  # every run in it is still version 1
        assert V2_ONLY not in f["runs/0000/steps"].dtype.names
    tr, ref = Trace.open(cut), Trace.open(whole)
    assert tr.status == "complete" and tr.format_version == 1
    assert tr.weights_crc == full.weights_crc and tr.n_steps == full.steps
    assert (tr.steps[V2_ONLY] == -1).all()
    np.testing.assert_array_equal(tr.steps["fresh_words"], ref.steps["fresh_words"])
    np.testing.assert_array_equal(tr.samples["coeff"], ref.samples["coeff"])
    assert replay(tr).matches

    # a new run appended to the version 1 file is a current run; the file becomes current
    run(cut, budget=40)
    with h5py.File(cut, "r") as f:
        assert int(f.attrs["format_version"]) == 3
        assert V2_ONLY in f["runs/0001/steps"].dtype.names
        assert V2_ONLY not in f["runs/0000/steps"].dtype.names
    first, second = Trace.open(cut, run=0), Trace.open(cut, run=1)
    assert (first.steps[V2_ONLY] == -1).all() and first.weights_crc == full.weights_crc
    assert (second.steps[V2_ONLY] == 2 * 2 * (2048 + 320)).all()
    proc = hilbench("report", str(cut), "--run", "0000")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_the_writer_resumes_a_version_1_run_and_drops_only_fresh_numbers(tmp_path):
    path = tmp_path / "v1.h5"
    w = TraceWriter.create(path, _attrs(), {}, flush_interval_s=None)
    w.append_step(0, 1, [5], [1], [2], [0.5], [1], 1e-3, 1, 7, 1.0, 2, 3, 40)
    w.close("interrupted")
    rewrite_as_v1(path)
    with TraceWriter.resume(path, flush_interval_s=None) as w:
        w.append_step(1, 2, [6, 7], [1, 2], [3, 4], [0.5, 1.0], [1, -1], 1e-3, 1, 8, 1.0, 6, 5, 80)
    tr = Trace.open(path)
    assert tr.status == "complete" and tr.steps["step"].tolist() == [0, 1]
    assert tr.steps["fresh_words"].tolist() == [3, 5]
    assert tr.steps[V2_ONLY].tolist() == [-1, -1]
    assert tr.samples["seed"].tolist() == [5, 6, 7]


def test_a_steps_table_of_no_known_layout_is_refused_in_one_line(tmp_path):
    path = tmp_path / "odd.h5"
    w = TraceWriter.create(path, _attrs(), {}, flush_interval_s=None)
    w.close("interrupted")
    with h5py.File(path, "r+", libver=("v110", "v110")) as f:
        g = f["runs/0000"]
        del g["steps"]
        g.create_dataset("steps", shape=(0,), maxshape=(None,), dtype=[("step", "<i8")])
    with pytest.raises(TraceError, match=r"steps table has the columns \['step'\]") as ei:
        TraceWriter.resume(path)
    assert "\n" not in str(ei.value) and "cannot resume run 0000" in str(ei.value)


def _attrs() -> dict:
    return {
        "protocol_version": 1,
        "backend": "emulate",
        "device_id": "twin-0",
        "firmware": "hilbench-twin 0.1.0",
        "model": "mlp-64",
        "model_hash": "sha256:0",
        "dataset": "digits",
        "seed": 1,
    }
