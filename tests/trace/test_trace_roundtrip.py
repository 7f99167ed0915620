"""Every field written by TraceWriter comes back from Trace, with the documented layout."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from trace_helpers import CONFIG, RUN_ATTRS, STEPS, write_known_run

from hilbench.errors import TraceError
from hilbench.trace import FORMAT_VERSION, Trace, TraceWriter, list_runs


def test_steps_and_samples_round_trip(known_trace: Path) -> None:
    tr = Trace.open(known_trace)
    assert tr.n_steps == 3
    assert tr.steps["step"].tolist() == [0, 1, 2]
    assert tr.steps["q"].tolist() == [2, 3, 1]
    assert tr.steps["sample_start"].tolist() == [0, 2, 5]
    assert tr.steps["batch_seed"].tolist() == [0xFFFFFFFF, 7, 8]
    assert tr.steps["eps"].tolist() == [1, 2, 1]
    assert tr.steps["lr"].tolist() == [1e-3, 5e-4, 2.5e-4]
    assert tr.steps["loss"].tolist() == [1.75, 1.5, 1.25]
    assert tr.steps["forward_passes"].tolist() == [4, 10, 12]
    assert tr.steps["fresh_words"].tolist() == [10, 25, 30]
    assert tr.steps["fresh_numbers"].tolist() == [2**63 - 1, 800, -1]
    assert len(tr.samples) == 6
    for i, s in enumerate(STEPS):
        rows = tr.step_samples(i)
        assert rows["step"].tolist() == [s["step"]] * s["q"]
        assert rows["seed"].tolist() == s["seeds"]
        assert rows["loss_plus"].tolist() == s["loss_plus"]
        assert rows["loss_minus"].tolist() == s["loss_minus"]
        assert rows["grad"].tolist() == s["grads"]
        assert rows["coeff"].tolist() == s["coeffs"]


def test_evals_timing_events_round_trip(known_trace: Path) -> None:
    tr = Trace.open(known_trace)
    assert tr.evals.tolist() == [(1, 10, 0.5, 1.4, "train"), (2, 12, 0.625, 1.3, "test")]
    assert tr.timing["command"].tolist() == ["PROBE", "APPLY", "EVAL"]
    assert tr.timing["source"].tolist() == ["device", "modeled", "host"]
    assert tr.timing["duration_s"].tolist() == [0.010, 0.002, 0.5]
    assert tr.events["kind"].tolist() == ["retry"]
    assert tr.events["detail"].tolist() == ["timeout after 200 ms — résumé"]
    assert tr.events["step"].tolist() == [1]
    assert 1.7e9 < tr.events["time"][0] < 4e9  # a Unix time


def test_attrs_config_blob_and_derived_values(known_trace: Path) -> None:
    tr = Trace.open(known_trace)
    for key, value in RUN_ATTRS.items():
        assert tr.attrs[key] == value
    assert tr.config == CONFIG
    assert json.loads(tr.attrs["config_json"]) == CONFIG
    assert tr.attrs["hilbench_version"] == "0.1.0"
    assert tr.attrs["start_time"].endswith("Z") and "T" in tr.attrs["start_time"]
    assert tr.attrs["end_time"] >= tr.attrs["start_time"]
    assert tr.attrs["finished"] is True
    assert tr.attrs["status"] == "complete"
    assert tr.model_blob == b"\x00model\xff" * 3
    assert tr.weights_crc == 0xDEADBEEF
    assert tr.final_accuracy == 0.625  # last *test* eval, not the later-written train one
    assert tr.forward_passes == 12
    assert tr.backend == "emulate"
    fp, loss = tr.loss_curve()
    assert fp.tolist() == [4, 10, 12] and loss.tolist() == [1.75, 1.5, 1.25]
    fp, acc = tr.accuracy_curve()
    assert fp.tolist() == [12] and acc.tolist() == [0.625]
    fp, acc = tr.accuracy_curve("train")
    assert fp.tolist() == [10] and acc.tolist() == [0.5]
    s = tr.summary()
    assert s["final_accuracy"] == 0.625
    assert s["forward_passes"] == 12
    assert s["steps"] == 3
    assert s["weights_crc"] == 0xDEADBEEF
    assert (s["model"], s["dataset"], s["status"]) == ("mlp-64", "digits", "complete")
    assert s["path"] == str(known_trace)


def test_on_disk_layout_matches_the_documented_contract(known_trace: Path) -> None:
    with h5py.File(known_trace, "r") as f:
        assert f.attrs["format"] == "hilbench-trace"
        assert int(f.attrs["format_version"]) == FORMAT_VERSION == 3
        g = f["runs/0000"]
        assert g["steps"].dtype.names == (
            "step",
            "q",
            "sample_start",
            "batch_seed",
            "eps",
            "lr",
            "loss",
            "forward_passes",
            "fresh_words",
            "fresh_numbers",
        )
        assert g["samples"].dtype.names == (
            "step",
            "seed",
            "loss_plus",
            "loss_minus",
            "grad",
            "coeff",
        )
        assert g["samples"].dtype["seed"] == np.dtype("<u4")
        assert g["samples"].dtype["loss_plus"] == np.dtype("<i4")
        assert g["timing"].dtype["command"] == np.dtype("S16")
        assert g["timing"].dtype["source"] == np.dtype("S8")
        assert g["events"].dtype.names == ("step", "time", "kind", "text_start", "text_bytes")
        assert g["event_text"].dtype == np.dtype("u1")  # the texts: UTF-8 bytes
        for name in ("steps", "samples", "evals", "timing", "events", "event_text"):
            ds = g[name]
            assert ds.chunks is not None and ds.maxshape == (None,)
            # gzip'd by the rewrite at close (docs/trace-format.md, "Compression")
            assert (ds.compression, ds.compression_opts, ds.shuffle) == ("gzip", 1, True)
            assert json.loads(ds.attrs["units"])
            assert ds.attrs["description"]
        assert json.loads(g["samples"].attrs["units"])["loss_plus"] == "Q16 nats"
        units = json.loads(g["timing"].attrs["units"])["duration_s"]
        assert units == "s (source instr: executed instructions, a count)"
        assert g["model_blob"].dtype == np.uint8 and g["model_blob"].compression == "gzip"
        assert g.attrs["weights_crc"] == 0xDEADBEEF


def test_compressed_tables_read_back_identically(tmp_path: Path) -> None:
    write_known_run(tmp_path / "plain.h5")
    write_known_run(tmp_path / "gz.h5", compress=True)
    a, b = Trace.open(tmp_path / "plain.h5"), Trace.open(tmp_path / "gz.h5")
    with h5py.File(tmp_path / "gz.h5", "r") as f:
        assert f["runs/0000/samples"].compression == "gzip"
        assert f["runs/0000/samples"].compression_opts == 1
    for name in ("steps", "samples", "evals", "timing"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist()


def test_several_runs_in_one_file(tmp_path: Path) -> None:
    path = tmp_path / "multi.h5"
    for n in range(3):
        with TraceWriter.create(path, {**RUN_ATTRS, "seed": n}, CONFIG) as w:
            for k in range(n + 1):
                w.append_step(k, 1, [k], [1], [2], [0.5], [1], 1e-3, 1, k, 1.0, 2 * (k + 1), k)
    assert list_runs(path) == ["0000", "0001", "0002"]
    assert Trace.open(path).run_id == "0002"  # default: the last run
    assert Trace.open(path).n_steps == 3
    assert Trace.open(path, 0).n_steps == 1
    assert Trace.open(path, "0001").attrs["seed"] == 1
    assert Trace.open(path, "1").run_id == "0001"
    with pytest.raises(TraceError, match=r"has no run '0007'; it has 0000, 0001, 0002"):
        Trace.open(path, 7)


def test_empty_run_reads_fine(tmp_path: Path) -> None:
    path = tmp_path / "empty.h5"
    with TraceWriter.create(path, RUN_ATTRS, {}):
        pass
    tr = Trace.open(path)
    assert tr.n_steps == 0 and len(tr.samples) == 0 and len(tr.events) == 0
    assert tr.status == "complete"
    assert tr.final_accuracy is None
    assert tr.forward_passes == 0
    assert tr.weights_crc is None  # not given to finish()
    assert tr.timing_summary() == {}
    fp, loss = tr.loss_curve()
    assert fp.shape == (0,) and loss.shape == (0,)
    assert tr.summary()["steps"] == 0


def test_timing_summary_keeps_sources_apart(tmp_path: Path) -> None:
    path = tmp_path / "timing.h5"
    with TraceWriter.create(path, RUN_ATTRS, {}) as w:
        for i in range(1, 101):
            w.append_timing(i, "PROBE", i / 1000, "device")
        w.append_timing(0, "HELLO", 0.25, "host")
        w.append_timing(0, "APPLY", 0.001, "modeled")
        w.append_timing(1, "APPLY", 0.003, "host")
    ts = Trace.open(path).timing_summary()
    assert set(ts) == {"PROBE", "HELLO", "APPLY@modeled", "APPLY@host"}
    p = ts["PROBE"]
    assert p["count"] == 100 and p["source"] == "device"
    assert p["p50"] == pytest.approx(0.0505)
    assert p["p90"] == pytest.approx(0.0901)
    assert p["p99"] == pytest.approx(0.09901)
    assert p["mean"] == pytest.approx(0.0505)
    assert ts["HELLO"] == {
        "count": 1,
        "source": "host",
        "p50": 0.25,
        "p90": 0.25,
        "p99": 0.25,
        "mean": 0.25,
    }
    assert ts["APPLY@modeled"]["p50"] == 0.001 and ts["APPLY@host"]["p50"] == 0.003


def test_set_attrs_and_unfinished_values(tmp_path: Path) -> None:
    path = tmp_path / "attrs.h5"
    w = write_known_run(path, finish=False)
    w.set_attrs(initial_weights_crc=0x12345678, note="warm start")
    w.flush()
    tr = Trace.open(path)  # the writer still has it open (SWMR)
    assert tr.attrs["initial_weights_crc"] == 0x12345678
    assert tr.attrs["note"] == "warm start"
    assert tr.finished is False and tr.status == "running"
    assert tr.weights_crc is None
    assert tr.final_accuracy == 0.625  # not finished: the last test eval
    assert tr.forward_passes == 12  # not finished: the last step's count
    w.finish("complete", final_accuracy=0.7, forward_passes=99)
    w.close()
    tr = Trace.open(path)
    assert (tr.final_accuracy, tr.forward_passes, tr.attrs["steps"]) == (0.7, 99, 3)
    assert tr.attrs["initial_weights_crc"] == 0x12345678


def test_steps_whose_samples_are_not_on_disk_are_not_shown(known_trace: Path) -> None:
    with h5py.File(known_trace, "r+") as f:  # as a reader may see a file mid-flush
        f["runs/0000/samples"].resize((4,))  # step 1 (samples 2..4) lost its last sample
    tr = Trace.open(known_trace)
    assert tr.steps["step"].tolist() == [0]
    assert tr.samples["seed"].tolist() == [0, 0xFFFFFFFF]
