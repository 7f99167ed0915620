"""Trace writer speed: step records appended per second, and the writer's share of a real
training step on the small model.

    python benchmarks/bench_trace.py                 # both figures (targets: >= 200,000/s, < 2%)
    python benchmarks/bench_trace.py --only records [--steps 200000] [--q 4] [--timing]
    python benchmarks/bench_trace.py --only share [--budget 20000] [--repeats 3]

records: the clock covers every append_step call (q = 4 samples each, values as numpy arrays
like the trainer's) with their flushes, then separately the close (final attributes and the
gzip rewrite, once per run); CPU time is printed too, as the wall clock of a loaded machine
says little. Bytes per step are for the file as the writer leaves it. --timing also appends
two timing rows per step.

share: ``hilbench.session.run`` trains the default MLP on the emulator (RunConfig(budget=...))
with the real writer, timing every writer call in the training thread and every background
flush (less the timer's own cost, calibrated); the share is writer time / training time
between the first and the last step. The same
run is then repeated with a writer whose appends do nothing, and the two step times are shown
side by side (an A/B of the wall clock: noisier than the direct measurement).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

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


# ---------------------------------------------------------------- records per second


def bench_records(path: Path, n: int, q: int, flush_rows: int, timing: bool, compress: str):
    rng = np.random.default_rng(0)
    seeds = rng.integers(0, 2**32, (n, q), dtype=np.uint32)
    lp = rng.integers(0, 2**20, (n, q), dtype=np.int32)
    lm = rng.integers(0, 2**20, (n, q), dtype=np.int32)
    grads = rng.normal(size=(n, q))
    coeffs = rng.integers(-64, 64, (n, q), dtype=np.int32)
    loss = (1.0 + rng.random(n)).tolist()
    t0, c0 = time.perf_counter(), time.process_time()
    w = TraceWriter.create(path, ATTRS, {"q": q}, flush_rows=flush_rows, compress=compress)
    for k in range(n):
        w.append_step(
            k, q, seeds[k], lp[k], lm[k], grads[k], coeffs[k], 1e-3, 1, k, loss[k],
            2 * q * (k + 1), q * 1000,
        )  # fmt: skip
        if timing:
            w.append_timing(k, "PROBE", 0.0042, "device")
            w.append_timing(k, "APPLY", 0.0007, "modeled")
    w.flush()
    t_appended, c_appended = time.perf_counter(), time.process_time()
    w.close("complete")
    dt = time.perf_counter() - t0
    assert Trace.open(path).n_steps == n
    return {
        "steps_per_s": n / dt,
        "append_only_per_s": n / (t_appended - t0),
        "append_only_cpu_per_s": n / (c_appended - c0),
        "bytes_per_step": path.stat().st_size / n,
        "seconds": dt,
        "close_s": time.perf_counter() - t_appended,
    }


# ---------------------------------------------------------------- share of a training step


class TimedWriter(TraceWriter):
    """The real writer, timing its calls: training thread and background flush thread."""

    main_s = 0.0
    background_s = 0.0
    main_cpu_s = 0.0  # thread CPU time: without the waits for the GIL held by other threads
    background_cpu_s = 0.0
    close_s = 0.0
    first_step: float | None = None
    last_step: float | None = None
    n_steps = 0

    calls = 0

    def _timed(self, fn: Any, *args: Any, **kw: Any) -> Any:
        TimedWriter.calls += 1
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kw)
        finally:
            TimedWriter.main_cpu_s += time.thread_time() - c0
            TimedWriter.main_s += time.perf_counter() - t0

    def append_step(self, *args: Any, **kw: Any) -> None:
        now = time.perf_counter()
        TimedWriter.first_step = TimedWriter.first_step or now
        self._timed(super().append_step, *args, **kw)
        TimedWriter.last_step = time.perf_counter()
        TimedWriter.n_steps += 1

    def append_eval(self, *args: Any, **kw: Any) -> None:
        self._timed(super().append_eval, *args, **kw)

    def append_timing(self, *args: Any, **kw: Any) -> None:
        self._timed(super().append_timing, *args, **kw)

    def append_event(self, *args: Any, **kw: Any) -> None:
        self._timed(super().append_event, *args, **kw)

    def _flush(self) -> None:
        if threading.current_thread() is threading.main_thread():
            return super()._flush()  # counted by the append call that triggered it
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return super()._flush()
        finally:
            TimedWriter.background_cpu_s += time.thread_time() - c0
            TimedWriter.background_s += time.perf_counter() - t0

    def close(self, status: str = "interrupted") -> None:
        t0 = time.perf_counter()
        try:
            super().close(status)
        finally:
            TimedWriter.close_s += time.perf_counter() - t0

    @classmethod
    def reset(cls) -> None:
        cls.main_s = cls.background_s = cls.close_s = 0.0
        cls.main_cpu_s = cls.background_cpu_s = 0.0
        cls.first_step = cls.last_step = None
        cls.n_steps = cls.calls = 0


def _probe_overhead_s(cpu: bool = False) -> float:
    """What timing one call adds (the wrapper's own frame and clock reads), per call."""

    class Probe(TimedWriter):
        def __init__(self) -> None:
            pass

    probe, noop = Probe(), (lambda: None)
    saved = TimedWriter.main_s, TimedWriter.main_cpu_s, TimedWriter.calls
    clock = time.thread_time if cpu else time.perf_counter
    n = 20_000
    t0 = clock()
    for _ in range(n):
        probe._timed(noop)
    wrapped = clock() - t0
    t0 = clock()
    for _ in range(n):
        noop()
    plain = clock() - t0
    TimedWriter.main_s, TimedWriter.main_cpu_s, TimedWriter.calls = saved
    return max(0.0, (wrapped - plain) / n)


class NullAppendWriter(TimedWriter):
    """Creates and finishes the run like the real writer, but appends nothing."""

    def append_step(self, *args: Any, **kw: Any) -> None:
        now = time.perf_counter()
        TimedWriter.first_step = TimedWriter.first_step or now
        TimedWriter.last_step = now
        TimedWriter.n_steps += 1

    def append_eval(self, *args: Any, **kw: Any) -> None:
        pass

    def append_timing(self, *args: Any, **kw: Any) -> None:
        pass

    def append_event(self, *args: Any, **kw: Any) -> None:
        pass


def _one_session(writer_cls: type, budget: int, trace: Path) -> dict[str, float]:
    from hilbench import session
    from hilbench.config import RunConfig

    TimedWriter.reset()
    original = session.TraceWriter
    session.TraceWriter = writer_cls
    c0 = time.process_time()
    try:
        session.run(RunConfig(budget=budget, live=False, trace=trace))
    finally:
        session.TraceWriter = original
    cpu_s = time.process_time() - c0
    span = TimedWriter.last_step - TimedWriter.first_step
    # the instrumentation's own cost is not the writer's
    main_s = max(0.0, TimedWriter.main_s - TimedWriter.calls * _probe_overhead_s())
    main_cpu_s = max(0.0, TimedWriter.main_cpu_s - TimedWriter.calls * _probe_overhead_s(True))
    steps = TimedWriter.n_steps - 1  # intervals between the first and the last step
    return {
        "steps": TimedWriter.n_steps,
        "step_s": span / steps,
        "writer_main_s": main_s,
        "writer_bg_s": TimedWriter.background_s,
        "writer_main_cpu_s": main_cpu_s,
        "writer_bg_cpu_s": TimedWriter.background_cpu_s,
        "close_s": TimedWriter.close_s,
        "span_s": span,
        "cpu_s": cpu_s,  # the whole run, both sides (the twin runs in-process)
    }


def bench_share(budget: int, repeats: int) -> dict[str, Any]:
    from threadpoolctl import threadpool_limits

    real, null = [], []
    with tempfile.TemporaryDirectory() as tmp, threadpool_limits(1):
        _one_session(TimedWriter, min(budget, 2000), Path(tmp) / "warmup.h5")
        for i in range(repeats):  # alternate, so drifts hit both alike
            real.append(_one_session(TimedWriter, budget, Path(tmp) / f"real{i}.h5"))
            null.append(_one_session(NullAppendWriter, budget, Path(tmp) / f"null{i}.h5"))
    best = min(real, key=lambda r: r["step_s"])
    share = [(r["writer_main_s"] + r["writer_bg_s"]) / r["span_s"] for r in real]
    share_cpu = [(r["writer_main_cpu_s"] + r["writer_bg_cpu_s"]) / r["span_s"] for r in real]
    return {
        "runs": real,
        "null_runs": null,
        "share_median": float(np.median(share)),
        "share_max": float(max(share)),
        "share_cpu_median": float(np.median(share_cpu)),
        "share_cpu_max": float(max(share_cpu)),
        "cpu_per_step_s": float(
            np.median([(r["writer_main_cpu_s"] + r["writer_bg_cpu_s"]) / r["steps"] for r in real])
        ),
        "step_s_real": best["step_s"],
        "step_s_null": min(r["step_s"] for r in null),
        "cpu_s_real": float(np.median([r["cpu_s"] for r in real])),
        "cpu_s_null": float(np.median([r["cpu_s"] for r in null])),
        "writer_per_step_s": float(
            np.median([(r["writer_main_s"] + r["writer_bg_s"]) / r["steps"] for r in real])
        ),
        "close_s": float(np.median([r["close_s"] for r in real])),
        "main_per_step_s": float(np.median([r["writer_main_s"] / r["steps"] for r in real])),
        "bg_per_step_s": float(np.median([r["writer_bg_s"] / r["steps"] for r in real])),
        "steps": best["steps"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("records", "share"))
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--q", type=int, default=4)
    ap.add_argument("--flush-rows", type=int, default=1024)
    ap.add_argument("--timing", action="store_true", help="also 2 timing rows per step")
    ap.add_argument("--compress", choices=("close", "live", "none"), default="close")
    ap.add_argument("--budget", type=int, default=20_000, help="forward passes per session run")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    if a.only in (None, "records"):
        with tempfile.TemporaryDirectory() as tmp:
            r = bench_records(
                Path(tmp) / "bench.h5", a.steps, a.q, a.flush_rows, a.timing, a.compress
            )
        print(
            f"records: {a.steps:,} steps of q={a.q}, flush every {a.flush_rows} steps, "
            f"compress={a.compress}{', +2 timing rows/step' if a.timing else ''}"
        )
        print(
            f"  {r['steps_per_s']:,.0f} step records/s incl. final flush, close and gzip "
            f"rewrite ({r['seconds']:.2f} s, of which close {r['close_s']:.2f} s); "
            f"{r['append_only_per_s']:,.0f}/s for the appends and flushes alone "
            f"({r['append_only_cpu_per_s']:,.0f}/s of CPU time)   [target >= 200,000/s]"
        )
        print(f"  {r['bytes_per_step']:.1f} bytes/step on disk")
    if a.only in (None, "share"):
        s = bench_share(a.budget, a.repeats)
        print(
            f"share: hilbench.session.run, default MLP on the emulator, budget {a.budget:,} "
            f"({s['steps']:,} steps of q=4), {a.repeats} runs each way"
        )
        print(
            f"  writer time per step {s['writer_per_step_s'] * 1e6:.1f} µs (training thread + "
            f"background flushes) = {s['share_median']:.2%} of a step (worst run "
            f"{s['share_max']:.2%})   [target < 2%]"
        )
        print(
            f"    of which appends in the training thread {s['main_per_step_s'] * 1e6:.1f} µs, "
            f"background flushes {s['bg_per_step_s'] * 1e6:.1f} µs per step"
        )
        print(
            f"  writer CPU time per step {s['cpu_per_step_s'] * 1e6:.1f} µs (thread CPU clocks: "
            f"no GIL waits) = {s['share_cpu_median']:.2%} of a step (worst run "
            f"{s['share_cpu_max']:.2%})   [target < 2%]"
        )
        print(
            f"  step time with the writer {s['step_s_real'] * 1e3:.3f} ms, with appends "
            f"switched off {s['step_s_null'] * 1e3:.3f} ms: ratio "
            f"{s['step_s_real'] / s['step_s_null']:.3f} (best of {a.repeats}, wall clock)"
        )
        print(
            f"  CPU time of a whole run with the writer {s['cpu_s_real']:.2f} s, without "
            f"{s['cpu_s_null']:.2f} s: ratio {s['cpu_s_real'] / s['cpu_s_null']:.3f} "
            f"(median of {a.repeats}; includes setup and the twin's work)"
        )
        print(f"  once per run: close (final flush + gzip rewrite) {s['close_s'] * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
