"""A real (short) ``hilbench run --trace`` with an I/O error injected at trace write N, for
every N (run under the io_faults.c shim: LD_PRELOAD). Each life goes through the command line
in this process (``hilbench.cli.main``): the faulted run, then with the fault gone
``report``, ``run --resume`` (if the run did not complete) and ``replay``. Prints one JSON
line per N.

The run's writer flushes every FLUSH_ROWS steps (the default, 1024, would flush a 50-step
run once, at its end) and has no background flush thread (so write N is the same write in
every life).

Usage: run_life.py DIR ERRNO STICKY [FIRST_N [LAST_N]]"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import functools
import gc
import io
import json
import os
import shutil
import sys
import traceback
from pathlib import Path

import h5py

from hilbench import cli
from hilbench.client import device_client
from hilbench.trace import Trace, TraceWriter

FLUSH_ROWS = 8
RUN = ["run", "--budget", "400", "--seed", "3", "--scheduler", "fixed:4", "--no-live"]

_create, _resume = TraceWriter.create.__func__, TraceWriter.resume.__func__
TraceWriter.create = classmethod(  # type: ignore[method-assign]
    functools.partial(_create, flush_rows=FLUSH_ROWS, flush_interval_s=None)
)
TraceWriter.resume = classmethod(  # type: ignore[method-assign]
    functools.partial(_resume, flush_rows=FLUSH_ROWS, flush_interval_s=None)
)


# A retry waits at least 2 s: a loaded host's slow round trip would otherwise log a ``late``
# event now and then, which moves every later write's number.
_client_init = device_client.DeviceClient.__init__


def _patient(self, port, *, min_rto: float = 0.01, **kw) -> None:
    _client_init(self, port, min_rto=max(min_rto, 2.0), **kw)


device_client.DeviceClient.__init__ = _patient  # type: ignore[method-assign]


def hilbench(*args: str) -> dict[str, object]:
    """``hilbench ARGS`` in this process: exit code, stdout, stderr (or the exception that
    escaped main, which is a bug)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(list(args))
    except BaseException as exc:
        return {"rc": None, "escaped": "".join(traceback.format_exception(exc))[-2000:]}
    return {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}


def weights_crc(path: Path) -> int | None:
    return Trace.open(path).weights_crc


def main() -> None:
    where, err, sticky = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    lib = ctypes.CDLL(None)
    lib.hb_fault_arm.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_char_p]
    lib.hb_fault_calls.restype = ctypes.c_long
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    last = int(sys.argv[5]) if len(sys.argv) > 5 else None
    clean = where / "clean.h5"
    ref = hilbench(*RUN, "--trace", str(clean))
    assert ref["rc"] == 0, ref
    print(json.dumps({"reference_crc": weights_crc(clean)}), flush=True)
    while True:
        faulthandler.dump_traceback_later(
            float(os.environ.get("HB_LIFE_TIMEOUT", "120")), exit=True
        )  # a hang: say where, end the child
        d = where / f"n{n:04d}"
        d.mkdir()
        path = d / "run.h5"
        out: dict[str, object] = {"n": n}
        lib.hb_fault_arm(n, err, sticky, str(d).encode())
        out["run"] = hilbench(*RUN, "--trace", str(path))
        gc.collect()
        out["open_hdf5_files"] = h5py.h5f.get_obj_count(h5py.h5f.OBJ_ALL, h5py.h5f.OBJ_FILE)
        calls = lib.hb_fault_calls()
        lib.hb_fault_arm(-1, 0, 0, None)
        out["exists"] = path.exists()
        if path.exists():
            shutil.copyfile(path, d / "faulted.h5")  # as the fault left it, to look at
            out["report"] = hilbench("report", str(path), "--json")
            try:
                out["status"] = Trace.open(path).status
            except Exception as exc:
                out["status"] = f"unreadable: {exc}"
            if out["status"] != "complete":
                out["resume"] = hilbench("run", "--resume", str(path), "--no-live")
            out["replay"] = hilbench("replay", str(path))
            with contextlib.suppress(Exception):
                out["final_status"] = Trace.open(path).status
                out["crc"] = weights_crc(path)
                out["steps"] = Trace.open(path).n_steps
        print(json.dumps(out), flush=True)
        if calls <= n or n == last:  # the run ended without reaching call n: all were tried
            return
        n += 1


if __name__ == "__main__":
    main()
