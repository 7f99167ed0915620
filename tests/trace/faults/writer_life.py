"""A writer's whole life with an I/O error injected at call N, for every N (run under the
io_faults.c shim: LD_PRELOAD). Prints one JSON line per N: what the writer raised and what a
reader, and then a resumed writer, found in the file.

Usage: writer_life.py DIR ERRNO STICKY [FIRST_N [LAST_N]]"""

from __future__ import annotations

import ctypes
import gc
import json
import sys
import traceback
import warnings
from pathlib import Path

import h5py

from hilbench.errors import TraceError
from hilbench.trace import Trace, TraceWriter

STEPS = 30
ATTRS = {
    "protocol_version": 1,
    "backend": "emulate",
    "device_id": "d",
    "firmware": "f",
    "model": "m",
    "model_hash": "h",
    "dataset": "x",
    "seed": 1,
}
EVENT_KINDS = {"note", "error", "interrupt", "resume"}


def append(w: TraceWriter, k: int) -> None:
    """Step k, its values a function of k (so every row on disk can be checked)."""
    q = 1 + k % 3
    seeds = [7 * k + i for i in range(q)]
    lp = [k + i for i in range(q)]
    w.append_step(k, q, seeds, lp, [-v for v in lp], [0.5 * k] * q, [k % 5 - 2] * q,
                  1e-3, 1, 3 * k, 1.0 + k, 8 * (k + 1), 100 + k, k)  # fmt: skip


def text(k: int) -> str:
    """Step k's event text: of many lengths (and not only ASCII), so a flush adds texts of
    every size and a torn one would show."""
    return f"step {k} µ " + "x" * (37 * k % 300)


def check_rows(tr: Trace) -> int:
    """Whole steps 0..n-1, each with the values append() gave, and every step's event with
    its whole text; returns n."""
    n = tr.n_steps
    assert tr.steps["step"].tolist() == list(range(n)), tr.steps["step"].tolist()
    for k in range(n):
        row = tr.steps[k]
        q = 1 + k % 3
        assert (int(row["q"]), int(row["batch_seed"]), float(row["loss"])) == (q, 3 * k, 1.0 + k)
        assert int(row["forward_passes"]) == 8 * (k + 1) and int(row["fresh_numbers"]) == k
        s = tr.step_samples(k)
        assert s["seed"].tolist() == [7 * k + i for i in range(q)], (k, s)
        assert s["coeff"].tolist() == [k % 5 - 2] * q
    kinds = set(tr.events["kind"].tolist())
    assert kinds <= EVENT_KINDS, kinds
    notes = tr.events[tr.events["kind"] == "note"]
    said = {int(e["step"]): str(e["detail"]) for e in notes if e["detail"] != "eval"}
    assert all(said.get(k) == text(k) for k in range(n)), (n, said)  # a step's event with it
    assert all(t == text(k) for k, t in said.items()), said  # and none torn
    return n


def life(path: Path, committed: list[int]) -> None:
    with TraceWriter.create(path, ATTRS, {"budget": 8 * STEPS}, flush_rows=10,
                            flush_interval_s=None) as w:  # fmt: skip
        for k in range(STEPS):
            w.event("note", text(k), step=k)  # buffered before the step: flushed with it
            append(w, k)
            if not w.pending:
                committed.append(w.steps_written)
            if k == 14:
                w.append_eval(k, 8 * (k + 1), 0.5, 1.5)
                w.event("note", "eval")
                w.flush()
                committed.append(w.steps_written)


def main() -> None:
    where, err, sticky = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    lib = ctypes.CDLL(None)
    lib.hb_fault_arm.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_char_p]
    lib.hb_fault_calls.restype = ctypes.c_long
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    last = int(sys.argv[5]) if len(sys.argv) > 5 else None
    while True:
        d = where / f"n{n:04d}"
        d.mkdir()
        path = d / "run.h5"
        out: dict[str, object] = {"n": n}
        committed: list[int] = [0]
        lib.hb_fault_arm(n, err, sticky, str(d).encode())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                life(path, committed)
                out["raised"] = None
            except TraceError as exc:
                out["raised"] = "TraceError"
                out["message"] = str(exc)
                out["notes"] = getattr(exc, "__notes__", [])
            except BaseException as exc:
                out["raised"] = type(exc).__name__
                out["message"] = "".join(traceback.format_exception(exc))
        out["warnings"] = [str(c.message) for c in caught]
        gc.collect()  # the writer is gone: HDF5 must hold no file of it (else a reopen here
        # would share HDF5's stale, detached copy)
        out["open_hdf5_files"] = h5py.h5f.get_obj_count(h5py.h5f.OBJ_ALL, h5py.h5f.OBJ_FILE)
        calls = lib.hb_fault_calls()
        lib.hb_fault_arm(-1, 0, 0, None)
        out["committed"] = max(committed)
        out["exists"] = path.exists()
        try:
            if path.exists():
                tr = Trace.open(path)
                out["status"] = tr.status
                out["steps"] = check_rows(tr)
                if tr.status != "complete":
                    with TraceWriter.resume(path, flush_interval_s=None) as w:
                        for k in range(w.current_step, STEPS):
                            w.event("note", text(k), step=k)
                            append(w, k)
                    tr = Trace.open(path)
                    out["resumed"] = check_rows(tr)
                    out["resumed_status"] = tr.status
        except BaseException as exc:
            out["check_failed"] = "".join(traceback.format_exception(exc))[-1500:]
        print(json.dumps(out), flush=True)
        if calls <= n or n == last:  # the life ran without reaching call n: all were tried
            return
        n += 1


if __name__ == "__main__":
    main()
