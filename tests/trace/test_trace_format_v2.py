"""Traces of format version 2 (event texts as vlen strings in HDF5's global heap): read,
resumed in their own layout, appended to; version 3 keeps the texts in a byte log
(hilbench/trace/event_text.py), which a full disk cannot tear.

Each test makes a real trace with a short run, then rewrites its events with h5py into the
version 2 layout (root format_version = 2, ``detail`` a vlen string, no ``event_text``).
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from hilbench import session
from hilbench.config import RunConfig
from hilbench.trace import Follower, Trace, TraceWriter
from hilbench.trace import schema as S
from hilbench.trace.replay import replay
from tests.cli_helpers import hilbench
from tests.trace.trace_helpers import CONFIG, RUN_ATTRS

V2_UNITS = {"step": "index", "time": "s since Unix epoch", "kind": "name", "detail": "text"}


def rewrite_as_v2(path: Path) -> None:
    """Turn a trace's runs into what hilbench wrote before format version 3."""
    with h5py.File(path, "r+", libver=("v110", "v110")) as f:
        f.attrs["format_version"] = 2
        for g in f["runs"].values():
            if S.EVENT_TEXT not in g:
                continue
            rows, text = g["events"][()], g[S.EVENT_TEXT][()].tobytes()
            old = np.empty(len(rows), S.EVENTS_DTYPE)
            for col in ("step", "time", "kind"):
                old[col] = rows[col]
            old["detail"] = [
                text[s : s + n].decode()
                for s, n in zip(rows["text_start"], rows["text_bytes"], strict=True)
            ]
            description = g["events"].attrs["description"]
            del g["events"], g[S.EVENT_TEXT]
            ds = g.create_dataset("events", data=old, maxshape=(None,), chunks=(64,))
            ds.attrs["units"] = json.dumps(V2_UNITS)
            ds.attrs["description"] = description


def config(path: Path, **kw) -> RunConfig:
    return RunConfig(trace=path, live=False, eval_every=100, scheduler="fixed:2", **kw)


def run(path: Path, **kw) -> session.RunResult:
    return session.run(config(path, **kw), target=session.direct_target())


def test_a_version_3_run_keeps_its_event_texts_in_a_byte_log(tmp_path):
    path = tmp_path / "v3.h5"
    with TraceWriter.create(path, RUN_ATTRS, CONFIG, flush_interval_s=None) as w:
        w.event("note", "plain")
        w.event("note", "")  # an empty text is a text too
        w.event("error", "µ-Ω " * 600)  # long and not ASCII
        w.flush()
        w.event("retry", "PROBE seq 12: no answer in 200 ms, attempt 2 of 3")
    with h5py.File(path, "r") as f:
        g = f["runs/0000"]
        assert g["events"].dtype == S.EVENT_ROWS_DTYPE and not g["events"].dtype.hasobject
        assert g[S.EVENT_TEXT].dtype == np.uint8
        assert g[S.EVENT_TEXT].shape[0] == sum(
            len(t.encode()) for t in ("plain", "", "µ-Ω " * 600, "PROBE seq 12: no answer in "
                                      "200 ms, attempt 2 of 3")
        )  # fmt: skip
    ev = Trace.open(path).events
    assert ev["detail"].tolist() == [
        "plain",
        "",
        "µ-Ω " * 600,
        "PROBE seq 12: no answer in 200 ms, attempt 2 of 3",
    ]
    assert ev["kind"].tolist() == ["note", "note", "error", "retry"]


def test_an_event_whose_text_is_not_on_disk_is_not_read(tmp_path):
    """A row whose text lies past the byte log's end (a flush cut short) ends the events."""
    path = tmp_path / "cut.h5"
    with TraceWriter.create(path, RUN_ATTRS, CONFIG, flush_interval_s=None) as w:
        for k in range(3):
            w.event("note", f"event {k}", step=k)
    with h5py.File(path, "r+") as f:
        g = f["runs/0000"]
        g[S.EVENT_TEXT].resize((len("event 0event 1") + 3,))  # event 2's text cut short
    assert Trace.open(path).events["detail"].tolist() == ["event 0", "event 1"]


def test_a_version_2_trace_reads_reports_and_follows_like_the_version_3_one(tmp_path):
    path = tmp_path / "v2.h5"
    run(path, budget=120)
    new = Trace.open(path)
    assert len(new.events) and "device" in new.events["kind"].tolist()  # the boot banner
    rewrite_as_v2(path)
    old = Trace.open(path)
    assert old.format_version == 2
    assert old.events["detail"].tolist() == new.events["detail"].tolist()
    assert old.events["kind"].tolist() == new.events["kind"].tolist()
    assert old.summary() == new.summary() and replay(old).matches
    assert Follower(path).poll().events["detail"].tolist() == new.events["detail"].tolist()
    proc = hilbench("report", str(path))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_a_version_2_run_resumes_in_its_own_layout_and_a_new_run_is_version_3(tmp_path):
    path = tmp_path / "v2.h5"
    w = TraceWriter.create(path, RUN_ATTRS, CONFIG, flush_interval_s=None)
    w.event("note", "before")
    w.close("interrupted")
    rewrite_as_v2(path)
    with TraceWriter.resume(path, flush_interval_s=None) as w:
        w.event("note", "after the resume")
    with h5py.File(path, "r") as f:
        assert f["runs/0000/events"].dtype.names[-1] == "detail"  # still version 2's layout
        assert S.EVENT_TEXT not in f["runs/0000"]
    details = Trace.open(path).events["detail"].tolist()
    assert details[0] == "before" and details[-1] == "after the resume"
    with TraceWriter.create(path, RUN_ATTRS, CONFIG, flush_interval_s=None) as w:
        w.event("note", "a new run")
    with h5py.File(path, "r") as f:
        assert int(f.attrs["format_version"]) == 3
        assert f["runs/0001/events"].dtype == S.EVENT_ROWS_DTYPE
    assert Trace.open(path, run=1).events["detail"].tolist() == ["a new run"]
