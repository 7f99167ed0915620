"""Bad files and bad input give one TraceError that names the problem, and corrupt nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from trace_helpers import CONFIG, RUN_ATTRS, write_known_run

from hilbench.errors import HilbenchError, TraceError
from hilbench.trace import Trace, TraceWriter, list_runs


def _step(w: TraceWriter, k: int, **over: object) -> None:
    args = dict(
        step=k,
        q=2,
        seeds=[k, k + 1],
        loss_plus=[10, 20],
        loss_minus=[11, 19],
        grads=[0.5, -0.5],
        coeffs=[1, -1],
        lr=1e-3,
        eps=1,
        batch_seed=k,
        loss=1.0,
        forward_passes=4 * (k + 1),
        fresh_words=2 * k,
    )
    args.update(over)
    w.append_step(**args)  # type: ignore[arg-type]


# ---------------------------------------------------------------- reading bad files


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"no trace file at .*nope.h5") as ei:
        Trace.open(tmp_path / "nope.h5")
    assert ei.value.fix


def test_text_file_is_not_hdf5(tmp_path: Path) -> None:
    path = tmp_path / "notes.h5"
    path.write_text("step,loss\n0,1.5\n")
    with pytest.raises(TraceError, match=r"notes.h5 is not an HDF5 file"):
        Trace.open(path)
    with pytest.raises(TraceError, match="is not an HDF5 file; refusing to overwrite"):
        TraceWriter.create(path, RUN_ATTRS, CONFIG)
    assert path.read_text() == "step,loss\n0,1.5\n"  # untouched


def test_foreign_hdf5_file(tmp_path: Path) -> None:
    path = tmp_path / "foreign.h5"
    with h5py.File(path, "w") as f:
        f["data"] = np.arange(5)
    with pytest.raises(TraceError, match="is an HDF5 file but not a hilbench trace"):
        Trace.open(path)
    with pytest.raises(TraceError, match=r"cannot append a run: .* not a hilbench trace"):
        TraceWriter.create(path, RUN_ATTRS, CONFIG)
    with h5py.File(path, "r") as f:  # untouched
        assert list(f) == ["data"] and f["data"][()].tolist() == [0, 1, 2, 3, 4]


def test_truncated_copy_of_a_real_trace(tmp_path: Path, known_trace: Path) -> None:
    data = known_trace.read_bytes()
    assert len(data) > 4000
    cut = tmp_path / "cut.h5"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"cut.h5 is truncated") as ei:
        Trace.open(cut)
    assert "\n" not in str(ei.value)


def test_corrupt_object_headers(tmp_path: Path, known_trace: Path) -> None:
    data = bytearray(known_trace.read_bytes())
    data[64:-64] = bytes(len(data) - 128)  # keep the superblock, wipe everything else
    bad = tmp_path / "bad.h5"
    bad.write_bytes(bytes(data))
    with pytest.raises(TraceError, match=r"bad.h5 is corrupt"):
        Trace.open(bad)


def test_newer_format_version(tmp_path: Path, known_trace: Path) -> None:
    newer = tmp_path / "newer.h5"
    shutil.copy(known_trace, newer)
    with h5py.File(newer, "r+") as f:
        f.attrs["format_version"] = 4
    with pytest.raises(TraceError) as ei:
        Trace.open(newer)
    msg = str(ei.value)
    assert "format version 4" in msg and "reads format version 3" in msg
    assert "upgrade hilbench" in msg
    with pytest.raises(TraceError, match=r"cannot append a run: .*format version 4"):
        TraceWriter.create(newer, RUN_ATTRS, CONFIG)


def test_directory_and_no_runs(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="is a directory"):
        Trace.open(tmp_path)
    path = tmp_path / "bare.h5"
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "hilbench-trace"
        f.attrs["format_version"] = 1
    assert list_runs(path) == []
    with pytest.raises(TraceError, match="holds no runs"):
        Trace.open(path)


def test_unwritable_path_names_path_and_reason(tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    with pytest.raises(TraceError, match=r"cannot create the directory .*afile.*Not a directory"):
        TraceWriter.create(blocker / "sub" / "run.h5", RUN_ATTRS, CONFIG)


def test_writer_makes_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "run.h5"
    with TraceWriter.create(path, RUN_ATTRS, CONFIG) as w:
        _step(w, 0)
    assert Trace.open(path).n_steps == 1


# ---------------------------------------------------------------- bad input to the writer


def test_run_attrs_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "x.h5"
    attrs = {k: v for k, v in RUN_ATTRS.items() if k not in ("model_hash", "seed")}
    with pytest.raises(TraceError, match=r"needs the attributes \['model_hash', 'seed'\]"):
        TraceWriter.create(path, attrs, CONFIG)
    with pytest.raises(TraceError, match=r"\['status'\] are written by the trace writer"):
        TraceWriter.create(path, {**RUN_ATTRS, "status": "complete"}, CONFIG)
    with pytest.raises(TraceError, match="'model' has type list"):
        TraceWriter.create(path, {**RUN_ATTRS, "model": ["a"]}, CONFIG)
    with pytest.raises(TraceError, match="cannot be stored as JSON"):
        TraceWriter.create(path, RUN_ATTRS, {"f": object()})
    assert not path.exists()  # nothing written for bad input


def test_bad_rows_are_rejected(tmp_path: Path) -> None:
    with TraceWriter.create(tmp_path / "x.h5", RUN_ATTRS, CONFIG) as w:
        with pytest.raises(TraceError, match="timing source 'wallclock'"):
            w.append_timing(0, "PROBE", 0.1, "wallclock")
        with pytest.raises(TraceError, match="duration of 'PROBE' at step 0 is -1"):
            w.append_timing(0, "PROBE", -1, "host")
        with pytest.raises(TraceError, match="command name must be an ASCII string of at most 16"):
            w.append_timing(0, "A_VERY_LONG_COMMAND_NAME", 0.1, "host")
        with pytest.raises(TraceError, match="q = 3 but got 2 seeds"):
            _step(w, 0, q=3)
        with pytest.raises(TraceError, match="not one of"):
            w.finish("done")
        assert w.pending == 0


def test_out_of_range_values_drop_only_that_step(tmp_path: Path) -> None:
    path = tmp_path / "x.h5"
    with TraceWriter.create(path, RUN_ATTRS, CONFIG) as w:
        _step(w, 0)
        _step(w, 1, seeds=[5, 2**32])  # not a u32
        _step(w, 2, coeffs=[1, 0.5])  # not an integer
        _step(w, 3)
        with pytest.raises(TraceError) as ei:
            w.flush()
        assert "step 1 not recorded: seed = 4294967296 is not u32" in str(ei.value)
        assert "(2 bad steps in this block)" in str(ei.value)
        _step(w, 4, batch_seed=-1)
        with pytest.raises(TraceError, match="step 4 not recorded: batch_seed = -1 is not u32"):
            w.flush()
    tr = Trace.open(path)
    assert tr.steps["step"].tolist() == [0, 3]
    assert tr.steps["sample_start"].tolist() == [0, 2]
    assert tr.samples["seed"].tolist() == [0, 1, 3, 4]
    assert tr.status == "complete"


def test_closed_writer_refuses_appends(tmp_path: Path) -> None:
    w = write_known_run(tmp_path / "x.h5")
    assert w.closed
    with pytest.raises(TraceError, match="is closed"):
        _step(w, 9)
    w.close()  # idempotent


def test_context_manager_records_failure_and_interrupt(tmp_path: Path) -> None:
    path = tmp_path / "x.h5"
    with pytest.raises(RuntimeError), TraceWriter.create(path, RUN_ATTRS, CONFIG) as w:
        _step(w, 0)
        raise RuntimeError("device fell over")
    with pytest.raises(KeyboardInterrupt), TraceWriter.create(path, RUN_ATTRS, CONFIG) as w:
        _step(w, 0)
        _step(w, 1)
        raise KeyboardInterrupt
    failed, interrupted = Trace.open(path, 0), Trace.open(path, 1)
    assert (failed.status, failed.finished, failed.n_steps) == ("failed", True, 1)
    assert (interrupted.status, interrupted.n_steps) == ("interrupted", 2)
    assert interrupted.weights_crc is None


def test_errors_are_hilbench_errors_with_a_fix(tmp_path: Path) -> None:
    with pytest.raises(HilbenchError) as ei:
        Trace.open(tmp_path / "missing.h5")
    assert ei.value.cause and ei.value.fix
    assert str(ei.value) == f"{ei.value.cause}. {ei.value.fix}"


class _Interrupting(list):
    """A sequence whose iteration is cut short by Ctrl-C, as a signal can cut an append."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        yield self[0]
        raise KeyboardInterrupt


def test_an_append_cut_short_by_ctrl_c_leaves_no_half_step(tmp_path: Path) -> None:
    path = tmp_path / "x.h5"
    with TraceWriter.create(path, RUN_ATTRS, CONFIG, flush_interval_s=None) as w:
        _step(w, 0)
        with pytest.raises(KeyboardInterrupt):
            _step(w, 1, grads=_Interrupting([0.25, 0.75]))
        _step(w, 2)
    tr = Trace.open(path)
    assert tr.steps["step"].tolist() == [0, 2]
    assert tr.samples["seed"].tolist() == [0, 1, 2, 3]
    assert tr.samples["grad"].tolist() == [0.5, -0.5, 0.5, -0.5]


def test_a_file_without_swmr_support_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "old.h5"
    with h5py.File(path, "w") as f:  # h5py's default: superblock 0, no SWMR possible
        f.attrs["format"] = "hilbench-trace"
        f.attrs["format_version"] = 1
    with pytest.raises(TraceError, match="superblock version 0, which cannot be written in SWMR"):
        TraceWriter.create(path, RUN_ATTRS, CONFIG)
    with h5py.File(path, "r") as f:
        assert "runs" not in f  # nothing half-written
