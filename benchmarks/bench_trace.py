"""Trace writer speed: ZO step records (q=4) appended per second, and bytes per step on disk.

    python benchmarks/bench_trace.py [--steps 200000] [--q 4] [--flush-rows 256] [--timing]

The clock covers every append_step call plus the final flush and close (values are drawn
beforehand, like a trainer that already has them). --timing also appends two timing rows per
step (PROBE from the device, APPLY modeled), as a real run does.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from hilbench.trace import Trace, TraceWriter

ATTRS = {
    "protocol_version": 1,
    "backend": "emulate",
    "device_id": "bench",
    "firmware": "-",
    "model": "bench",
    "model_hash": "-",
    "dataset": "-",
    "seed": 0,
}


def bench(path: Path, n: int, q: int, flush_rows: int, timing: bool, compress: bool) -> dict:
    rng = np.random.default_rng(0)
    seeds = rng.integers(0, 2**32, (n, q)).tolist()
    lp = rng.integers(0, 2**20, (n, q)).tolist()
    lm = rng.integers(0, 2**20, (n, q)).tolist()
    grads = rng.normal(size=(n, q)).tolist()
    coeffs = rng.integers(-64, 64, (n, q)).tolist()
    loss = (1.0 + rng.random(n)).tolist()
    t0 = time.perf_counter()
    w = TraceWriter.create(path, ATTRS, {"q": q}, flush_rows=flush_rows, compress=compress)
    for k in range(n):
        w.append_step(
            k,
            q,
            seeds[k],
            lp[k],
            lm[k],
            grads[k],
            coeffs[k],
            1e-3,
            1,
            k,
            loss[k],
            2 * q * (k + 1),
            q * k,
        )
        if timing:
            w.append_timing(k, "PROBE", 0.0042, "device")
            w.append_timing(k, "APPLY", 0.0007, "modeled")
    w.close("complete")
    dt = time.perf_counter() - t0
    assert Trace.open(path).n_steps == n
    return {"steps_per_s": n / dt, "bytes_per_step": path.stat().st_size / n, "seconds": dt}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--q", type=int, default=4)
    ap.add_argument("--flush-rows", type=int, default=256)
    ap.add_argument("--timing", action="store_true", help="also 2 timing rows per step")
    ap.add_argument("--compress", action="store_true", help="gzip the tables (see the doc)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = bench(Path(tmp) / "bench.h5", a.steps, a.q, a.flush_rows, a.timing, a.compress)
    print(
        f"trace writer: {a.steps} steps, q={a.q}, flush every {a.flush_rows} steps"
        f"{', +2 timing rows/step' if a.timing else ''}{', gzip' if a.compress else ''}"
    )
    print(
        f"  {r['steps_per_s']:,.0f} step records/s (incl. final flush+close, {r['seconds']:.2f} s)"
    )
    print(f"  {r['bytes_per_step']:.1f} bytes/step on disk")


if __name__ == "__main__":
    main()
