"""Storage: gzip'd tables after close, files other tools read, SIGTERM, events, liveness."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from trace_helpers import CONFIG, RUN_ATTRS, write_known_run

from hilbench.trace import Trace, TraceWriter, list_runs, sigterm
from hilbench.trace import writer as W
from tests.needs import need_tool


def _write_steps(path: Path, n: int, **kw: object) -> None:
    rng = np.random.default_rng(1)
    with TraceWriter.create(path, RUN_ATTRS, CONFIG, flush_rows=10, **kw) as w:
        for k in range(n):
            w.append_step(
                k,
                4,
                rng.integers(0, 2**32, 4, dtype=np.uint32),
                rng.integers(60000, 200000, 4),
                rng.integers(60000, 200000, 4),
                rng.normal(size=4),
                rng.integers(-300, 300, 4),
                1000.0,
                2,
                k,
                1.5 - k / n,
                8 * (k + 1),
                8 * 1234,
            )
            w.append_timing(k, "PROBE", 0.001 + 1e-6 * k, "modeled")
            w.append_timing(k, "PROBE", 0.002, "host")
            if k % 100 == 0:
                w.append_eval(k, 8 * (k + 1), 0.5, 1.0)


def test_tables_are_gzipped_at_close_and_read_back_identically(tmp_path: Path) -> None:
    gz, plain = tmp_path / "gz.h5", tmp_path / "plain.h5"
    _write_steps(gz, 3000)
    _write_steps(plain, 3000, compress="none")
    a, b = Trace.open(gz), Trace.open(plain)
    for name in ("steps", "samples", "evals", "timing", "events"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    assert a.attrs == b.attrs | {
        "start_time": a.attrs["start_time"],
        "end_time": a.attrs["end_time"],
    }
    with h5py.File(gz, "r") as f:
        for name in ("steps", "samples", "evals", "timing", "events"):
            ds = f["runs/0000"][name]
            assert ds.compression == "gzip" and ds.maxshape == (None,), name
    # the point of it: a smaller file (flushing every 10 steps, ~3x smaller in practice)
    assert gz.stat().st_size < 0.6 * plain.stat().st_size
    assert not list(tmp_path.glob(".*.tmp"))  # no leftover of the rewrite


def test_gzip_at_close_keeps_every_run_and_a_new_run_appends(tmp_path: Path) -> None:
    path = tmp_path / "multi.h5"
    write_known_run(path, model_blob=b"blob")
    write_known_run(path)
    with TraceWriter.create(path, RUN_ATTRS, CONFIG, compress="none") as w:
        w.append_step(0, 1, [1], [2], [3], [0.5], [1], 1e-3, 1, 0, 1.0, 2, 1)
    assert list_runs(path) == ["0000", "0001", "0002"]
    assert Trace.open(path, 0).model_blob == b"blob"
    assert Trace.open(path, 1).n_steps == 3 and Trace.open(path, 2).n_steps == 1
    with h5py.File(path, "r") as f:
        assert f["runs/0001/samples"].compression == "gzip"
        assert f["runs/0002/samples"].compression is None  # compress="none"
        assert f.attrs["written_by"] == "hilbench 0.1.0"


def test_a_failed_rewrite_leaves_a_valid_uncompressed_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(W, "compact", broken)
    path = tmp_path / "full.h5"
    with pytest.warns(W.TraceWarning, match="stays uncompressed.*No space left"):
        write_known_run(path)
    tr = Trace.open(path)
    assert (tr.n_steps, tr.status) == (3, "complete")


def test_compress_mode_is_checked(tmp_path: Path) -> None:
    with pytest.raises(W.TraceError, match="compress = 'zstd' is not one of"):
        TraceWriter.create(tmp_path / "x.h5", RUN_ATTRS, CONFIG, compress="zstd")


def _walk_dtypes(obj: h5py.Group) -> list[np.dtype]:
    out = [obj.attrs.get_id(k).dtype for k in obj.attrs]
    for child in obj.values():
        if isinstance(child, h5py.Group):
            out += _walk_dtypes(child)
        else:
            out += [child.dtype] + [child.attrs.get_id(k).dtype for k in child.attrs]
    return out


def test_nothing_is_pickled_only_numbers_and_strings(known_trace: Path) -> None:
    def plain(dt: np.dtype) -> bool:
        if dt.names:
            return all(plain(dt[n]) for n in dt.names)
        if dt.kind == "O":
            return h5py.check_string_dtype(dt) is not None  # vlen UTF-8 strings only
        return dt.kind in "biufS"

    with h5py.File(known_trace, "r") as f:
        dtypes = _walk_dtypes(f)
    assert dtypes and all(plain(dt) for dt in dtypes)


def test_h5dump_reads_a_trace(known_trace: Path) -> None:
    h5dump = need_tool("h5dump", "apt-get install hdf5-tools")
    out = subprocess.run(
        [h5dump, "-p", str(known_trace)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert '"hilbench-trace"' in out.stdout
    assert 'DATASET "samples"' in out.stdout and "COMPRESSION" in out.stdout
    assert 'DATASET "event_text"' in out.stdout  # the events' texts: a byte log
    raw = known_trace.parent / "event_text.bin"
    dump = [h5dump, "-d", "/runs/0000/event_text", "-b", "-o", str(raw), str(known_trace)]
    assert subprocess.run(dump, capture_output=True, timeout=60).returncode == 0
    assert "timeout after 200 ms" in raw.read_bytes().decode()  # UTF-8, as written
    assert "4294967295" in out.stdout  # the u32 seed, unmangled
    attrs = subprocess.run(
        [h5dump, "-a", "/runs/0000/status", str(known_trace)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert attrs.returncode == 0 and '"complete"' in attrs.stdout


# ---------------------------------------------------------------- events for the link layer


def test_event_without_a_step_lands_on_the_step_in_progress(tmp_path: Path) -> None:
    path = tmp_path / "ev.h5"
    with TraceWriter.create(path, RUN_ATTRS, CONFIG) as w:
        w.event("reset", "boot nonce changed")  # before any step: step 0
        w.append_step(0, 1, [1], [2], [3], [0.5], [1], 1e-3, 1, 0, 1.0, 2, 1)
        assert (w.last_step, w.current_step, w.forward_passes) == (0, 1, 2)
        on_event = w.event  # what Target.on_event(kind, detail) takes
        on_event("retry", "PROBE seq 3: attempt 2")
        w.append_event(None, "resync", "dropped a damaged frame")
        w.append_event(7, "note", "explicit step")
    ev = Trace.open(path).events
    assert ev["kind"].tolist() == ["reset", "retry", "resync", "note"]
    assert ev["step"].tolist() == [0, 1, 1, 7]
    assert Trace.open(path).event_counts() == {"reset": 1, "retry": 1, "resync": 1, "note": 1}


# ---------------------------------------------------------------- SIGTERM and liveness

SLEEPER = """
import sys, time
from hilbench.trace import TraceWriter
attrs = {k: v for k, v in (a.split("=", 1) for a in sys.argv[2:])}
with TraceWriter.create(sys.argv[1], attrs, {}, flush_rows=10**6, flush_interval_s=3600) as w:
    for k in range(25):
        w.append_step(k, 1, [k], [1], [2], [0.5], [1], 1e-3, 1, k, 1.0, 2 * (k + 1), 1)
    print("buffered", flush=True)
    time.sleep(60)
"""
ATTR_ARGS = [f"{k}={v}" for k, v in RUN_ATTRS.items()]


def test_sigterm_flushes_and_marks_the_run_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "term.h5"
    proc = subprocess.Popen(
        [sys.executable, "-c", SLEEPER, str(path), *ATTR_ARGS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "buffered"
        assert W.writer_alive(path) is True
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    tr = Trace.open(path)
    assert (tr.status, tr.finished, tr.n_steps) == ("interrupted", True, 25)  # none lost
    assert tr.events["kind"].tolist() == ["interrupt"]
    assert tr.events["detail"].tolist() == ["SIGTERM"]
    assert W.writer_alive(path) is False
    with h5py.File(path, "r") as f:  # closed cleanly (and gzip'd): any tool opens it
        assert f["runs/0000/steps"].compression == "gzip"


def test_sigterm_handler_is_only_installed_while_a_writer_is_open(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with TraceWriter.create(tmp_path / "a.h5", RUN_ATTRS, CONFIG) as a:
        assert signal.getsignal(signal.SIGTERM) is sigterm.on_sigterm
        with TraceWriter.create(tmp_path / "b.h5", RUN_ATTRS, CONFIG):
            pass
        assert signal.getsignal(signal.SIGTERM) is sigterm.on_sigterm  # a is still open
        assert not a.closed
    assert signal.getsignal(signal.SIGTERM) == before
    with TraceWriter.create(tmp_path / "c.h5", RUN_ATTRS, CONFIG, handle_sigterm=False):
        assert signal.getsignal(signal.SIGTERM) == before


def test_an_application_handler_is_left_alone(tmp_path: Path) -> None:
    def mine(signum: int, frame: object) -> None:
        pass

    old = signal.signal(signal.SIGTERM, mine)
    try:
        with TraceWriter.create(tmp_path / "a.h5", RUN_ATTRS, CONFIG):
            assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, old)


def test_writer_alive_tells_a_live_writer_from_a_dead_one(tmp_path: Path) -> None:
    path = tmp_path / "live.h5"
    assert W.writer_alive(path) is False  # no file
    w = TraceWriter.create(path, RUN_ATTRS, CONFIG)
    try:
        assert W.writer_alive(path) is True
        assert Trace.open(path).status == "running"
    finally:
        w.close()
    assert W.writer_alive(path) is False


def test_the_gzip_rewrite_happens_before_the_lock_is_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = []
    real = W.compact

    def spy(path: Path) -> None:
        seen.append(W.writer_alive(path))
        t0 = time.monotonic()
        real(path)
        seen.append(time.monotonic() - t0 < 30)

    monkeypatch.setattr(W, "compact", spy)
    write_known_run(tmp_path / "x.h5")
    assert seen == [True, True]  # no other writer could open the file meanwhile
    assert os.path.getsize(tmp_path / "x.h5") > 0
