"""The firmware's forward pass per op and per model: the SIL build of device_fw's core (C, the
same code a board runs) against the emulator (hilbench.npu, default backend) and TFLM
(tflite-micro's interpreter, reference kernels), side by side in one run; then a ZO step on the
SIL split into forward passes, loss, PRNG, perturbation and update.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_firmware.py [--rounds 3] [--budget 0.05]

It first builds the C benchmark program (``make -C device_fw bench``: bench/bench.c, the core's
API and the port's tick counter; on this host, ticks are ns of CLOCK_MONOTONIC) and says what
each engine is: the CPU, the firmware's compiler and flags, the emulator's backend and kernel
table, the tflite-micro version.

Per op: one model blob per op *shape* of the zoo models (MLP, CNN, MobileNetV2 alpha 0.35
32x32; ops of the same kind and geometry cost the same, so each shape is timed once and
counted), plus ResNet18 (width 0.25, 32x32)'s max pool and an average pool of the same window,
since no other zoo model pools. ADD (two activations in a model) adds its input to itself: a
blob has one input. Per model: the whole model's blob, and the sum of its per-op rows weighted
by their counts (what the ops cost alone; the difference is the interpreter's own work).

Every engine runs the same int8 graph on the same random input; their outputs must be equal
byte for byte (a row that differs says MISMATCH and the run exits 1), so each row times the
right computation. Times: the fastest forward pass (one input) of the runs each engine gets
in ``--budget`` seconds, the engines taking turns for ``--rounds`` rounds so that a busy
machine slows all three alike; the firmware times itself, the emulator and TFLM are timed from
Python (``time.perf_counter``, also monotonic; with ``--clock thread`` all three count their
thread's CPU time instead, which time spent descheduled on a busy machine does not inflate),
so their per-call overhead (microseconds) is in their figures and dominates the smallest ops.
Ratios are time / time: "SIL/emu" below 1 means the firmware is faster.

ZO step (SIL, ``hilbench-bench zo``): the model with its LOSS section and the default ZO method
(no ZOCF: Rademacher, fixed scale, two-point, q16 masters, nearest rounding), a random data
set, ``--q`` seeds and a mini-batch of ``--batch``. PROBE = forward passes (2 q B, each at the
cost of an unperturbed one) + loss + PRNG (the scales, and each perturbed forward pass drawing
its samples row by row: both timed alone with the core's own functions) + perturb (the rest:
deltas and clamps into the row buffer, batch indices). APPLY = PRNG (samples in chunks) +
update (the rest). The twin (hilbench.device's ModelState, which runs the 2q perturbed models
batched) does the same PROBE and APPLY for comparison; its losses and weights CRC must equal
the firmware's.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import platform
import shlex
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hilbench.launch.make import output_tail, run_make

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "device_fw" / "build" / "bench" / "hilbench-bench"
MODELS = [
    ("MLP", "mlp", {}),
    ("CNN", "cnn", {}),
    ("MobileNetV2 a0.35 32x32", "mobilenet_v2", {"alpha": 0.35, "resolution": 32}),
]
POOL_MODEL = ("ResNet18 w0.25 32x32", "resnet18", {"width": 0.25, "resolution": 32})
SHORT = {
    "CONV_2D": "conv",
    "DEPTHWISE_CONV_2D": "depthwise",
    "FULLY_CONNECTED": "fc",
    "ADD": "add",
    "MEAN": "mean",
    "RESHAPE": "reshape",
    "MAX_POOL_2D": "maxpool",
    "AVERAGE_POOL_2D": "avgpool",
}
# op params that are quantization, not geometry (the cost does not depend on them)
QUANT_KEYS = ("offset", "multiplier", "shift", "act_", "activation", "left_shift")
SIL_MAX_RUNS = 4096  # HB_BENCH_MAX_RUNS (device_fw/bench/hb_bench.h)
# --clock: the program's tick clock and Python's timer with it (elapsed, or this thread's CPU)
CLOCKS = {"monotonic": time.perf_counter, "thread": time.thread_time}
# the run that stands for a measurement: the fastest of elapsed times (a run can only be slowed);
# the median of thread CPU times (on a VM that clock may also under-count a short run)
STAT = {"monotonic": "min", "thread": "median"}
clock = "monotonic"


class BenchError(RuntimeError):
    """The benchmark program failed or refused its input (the message says which)."""


# ---- the C benchmark program ---------------------------------------------------------------------


def build_bench(root: Path = ROOT) -> Path:
    """``make -C device_fw bench`` (make decides what changed), one build at a time."""
    status, output = run_make(root, "bench")
    if status != 0:
        raise BenchError(
            f"building the benchmark failed (make -C device_fw bench): {output_tail(output)}; "
            "fix the compile error and run again"
        )
    return root / "device_fw" / "build" / "bench" / "hilbench-bench"


@dataclass
class Report:
    """The program's output: its ``build`` line and its records, in order."""

    build: dict[str, str]
    records: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def get(self, name: str, **match: str) -> dict[str, str]:
        for rec, kv in self.records:
            if rec == name and all(kv.get(k) == v for k, v in match.items()):
                return kv
        raise BenchError(f"the benchmark's report has no {name} {match} record")


def parse_report(text: str) -> Report:
    """``record key=value ...`` lines (hb_bench.h); an ``error`` record raises BenchError."""
    build: dict[str, str] | None = None
    records = []
    for line in text.splitlines():
        if not line.strip():
            continue
        words = shlex.split(line)
        fields = dict(w.split("=", 1) for w in words[1:])
        if words[0] == "error":
            raise BenchError(f"the benchmark refused: {fields.get('message')}")
        if words[0] == "build":
            build = fields
        else:
            records.append((words[0], fields))
    if build is None:
        raise BenchError("the benchmark printed no build line: is it hilbench-bench?")
    return Report(build, records)


def split(rep: Report, step: str) -> dict[str, int]:
    """A ``zo_split`` record's ticks (total and parts) by name."""
    kv = rep.get("zo_split", step=step)
    return {k: int(v) for k, v in kv.items() if k not in ("step", "stat")}


def run_bench(binary: Path, *args: str, timeout: float = 600) -> Report:
    """The program with ``args`` (and the ``--clock`` in use); its report."""
    done = subprocess.run(
        [str(binary), *args, "--clock", clock],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode not in (0, 1) or (done.returncode == 1 and "error" not in done.stdout):
        raise BenchError(
            f"{binary.name} {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}"
        )
    return parse_report(done.stdout)


@dataclass
class SilForward:
    ops: int
    act_bytes: int
    min_s: float
    median_s: float
    output: np.ndarray  # int8, the first run's
    stable: bool


def sil_forward(binary: Path, blob: bytes, x: np.ndarray, runs: int, work: Path) -> SilForward:
    """``hilbench-bench forward`` on a blob and one input item."""
    bp, xp = work / "model.blob", work / "input.bin"
    bp.write_bytes(blob)
    xp.write_bytes(np.ascontiguousarray(x, np.int8).tobytes())
    rep = run_bench(binary, "forward", str(bp), str(xp), "--runs", str(runs))
    f = rep.get("forward")
    out = np.frombuffer(bytes.fromhex(rep.get("output")["hex"]), np.int8)
    return SilForward(
        int(f["ops"]),
        int(f["act_bytes"]),
        int(f["min"]) * 1e-9,
        int(f["median"]) * 1e-9,
        out,
        f["stable"] == "1",
    )


# ---- single-op graphs ---------------------------------------------------------------------------


def geometry(op) -> tuple:
    return tuple(
        sorted(
            (k, v)
            for k, v in op.params.items()
            if not any(q in k for q in QUANT_KEYS) and isinstance(v, int | str)
        )
    )


def op_key(g, op) -> tuple:
    shapes = tuple(g.tensors[n].shape for n in (*op.inputs, *op.outputs))
    return (op.kind, shapes, geometry(op))


def label(g, op) -> str:
    t = g.tensors
    x, y = t[op.inputs[0]].shape, t[op.outputs[0]].shape
    dims = lambda s: "x".join(map(str, s))  # noqa: E731
    p = op.params
    win = ""
    if op.kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        w = t[op.inputs[1]].shape
        win = f" {w[1]}x{w[2]}/{p['stride_h']}"
    elif "POOL" in op.kind:
        win = f" {p['filter_h']}x{p['filter_w']}/{p['stride_h']}"
    if op.kind == "ADD":
        return f"add {dims(x)}"
    return f"{SHORT.get(op.kind, op.kind)}{win} {dims(x)}>{dims(y)}"


def single_op_graph(g, op, name: str):
    """A graph of ``op`` alone: its first input the graph's input, its constants, its output.
    An ADD of two activations becomes the ADD of its first input with itself (requantized for
    that: the same loops)."""
    from hilbench.npu.graph import Graph, Op
    from hilbench.npu.ops import add

    t = g.tensors
    x = op.inputs[0]
    inputs, params = list(op.inputs), dict(op.params)
    if op.kind == "ADD":
        qa, qo = t[x].qparams, t[op.outputs[0]].qparams
        sa, za = float(qa.scale[0]), int(qa.zero_point[0])
        params = add.prepare(
            sa, za, sa, za, float(qo.scale[0]), int(qo.zero_point[0]), op.params["activation"]
        )
        inputs = [x, x]
    tensors = {n: t[n] for n in (*inputs, *op.outputs)}
    for n in inputs[1:]:
        if n != x and not t[n].is_constant:
            raise ValueError(f"{g.name}: op {op.kind} has a second activation input {n}")
    sg = Graph(tensors, [Op(op.kind, inputs, list(op.outputs), params)], x, op.outputs[0], name)
    sg.validate()
    return sg


@dataclass
class Row:
    label: str
    graph: object
    counts: dict[str, int] = field(default_factory=dict)  # ops of this shape per model
    sil: float = float("inf")
    emu: float = float("inf")
    tflm: float = float("inf")
    same: bool = True
    ops: int = 1


def op_rows(models: list[tuple[str, object]], pool_model: tuple[str, object] | None) -> list[Row]:
    """One row per op shape, in order of first appearance, with its count per model; then the
    pool model's max pool and an average pool of the same window."""
    from hilbench.npu.graph import Op

    rows: dict[tuple, Row] = {}
    for title, g in models:
        for op in g.ops:
            k = op_key(g, op)
            if k not in rows:
                rows[k] = Row(label(g, op), single_op_graph(g, op, f"{g.name}-op{len(rows)}"))
            rows[k].counts[title] = rows[k].counts.get(title, 0) + 1
    out = list(rows.values())
    if pool_model is not None:
        title, g = pool_model
        op = next(op for op in g.ops if op.kind == "MAX_POOL_2D")
        avg_op = Op("AVERAGE_POOL_2D", op.inputs, op.outputs, dict(op.params))
        out.append(Row(label(g, op), single_op_graph(g, op, "maxpool"), {title: 1}))
        out.append(Row(label(g, avg_op), single_op_graph(g, avg_op, "avgpool"), {title: 0}))
    return out


# ---- timing --------------------------------------------------------------------------------------


def best_of(fn: Callable[[], object], runs: int) -> float:
    """The fastest (``--clock thread``: the median) of ``runs`` timed calls after a warm-up."""
    timer = CLOCKS[clock]
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t = timer()
        fn()
        times.append(timer() - t)
    return min(times) if STAT[clock] == "min" else statistics.median(times)


def runs_for(seconds: float, budget: float, cap: int) -> int:
    return int(max(3, min(cap, budget / max(seconds, 1e-7))))


class Tflm:
    def __init__(self, g) -> None:
        from tflite_micro.python.tflite_micro import runtime

        from hilbench.npu.tflite import export_tflite

        model = export_tflite(g, 1)
        self.it = runtime.Interpreter.from_bytes(model, arena_size=max(1 << 20, 8 * len(model)))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.it.set_input(x, 0)
        self.it.invoke()
        return np.asarray(self.it.get_output(0))


def measure(row: Row, binary: Path, rounds: int, budget: float, work: Path, seed: int) -> None:
    """SIL, emulator and TFLM in turn on one graph, ``rounds`` times; the fastest of each."""
    from hilbench.npu.blob import to_blob

    g = row.graph
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (1, *g.input_shape)).astype(np.int8)
    blob = to_blob(g)
    tflm = Tflm(g)
    want = g.run(x).reshape(-1)
    first = sil_forward(binary, blob, x, 1, work)
    row.ops = first.ops
    row.same = (
        np.array_equal(first.output, want)
        and np.array_equal(tflm(x).reshape(-1), want)
        and first.stable
    )
    n_sil = runs_for(first.min_s, budget, SIL_MAX_RUNS)
    n_emu = runs_for(best_of(lambda: g.run(x), 1), budget, 10_000)
    n_tflm = runs_for(best_of(lambda: tflm(x), 1), budget, 10_000)
    for _ in range(rounds):
        s = sil_forward(binary, blob, x, n_sil, work)
        row.same = row.same and s.stable and np.array_equal(s.output, want)
        row.sil = min(row.sil, s.min_s if STAT[clock] == "min" else s.median_s)
        row.emu = min(row.emu, best_of(lambda: g.run(x), n_emu))
        row.tflm = min(row.tflm, best_of(lambda: tflm(x), n_tflm))


# ---- what runs where -----------------------------------------------------------------------------


def cpu() -> str:
    name, flags = platform.processor() or platform.machine(), set()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            key, _, val = line.partition(":")
            if key.strip() == "model name":
                name = val.strip()
            if key.strip() in ("flags", "Features") and not flags:
                flags = set(val.split())
    wanted = ("sse4_2", "avx2", "fma", "avx_vnni", "avx512f", "avx512_vnni", "asimd", "asimddp")
    return f"{name} ({platform.machine()}; {' '.join(f for f in wanted if f in flags)})"


def source_state() -> str:
    """The commit the firmware was built from, and whether device_fw/core differs from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "device_fw/core"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    return f"commit {head}" + (" + uncommitted changes in device_fw/core" if dirty else "")


def engines(build: dict[str, str]) -> list[str]:
    from hilbench.npu import native
    from hilbench.npu.native import sources
    from hilbench.npu.ops import backend as _backend

    backend = _backend.name()
    isa = native.best_isa() if backend == "native" else "-"
    cc = sysconfig.get_config_var("CC") or "cc"
    return [
        f"CPU: {cpu()}",
        f"SIL: device_fw core ({source_state()}), {build['compiler']}, {build['flags']} "
        f"(scalar C; make -C device_fw bench); ticks: {build['clock']}, timer overhead "
        f"{build['tick_overhead']} subtracted",
        f"emulator: hilbench.npu backend {backend!r}, kernel table {isa} ({cc.split()[0]} "
        f"{' '.join(sources.CFLAGS)}), one input per call",
        f"TFLM: tflite-micro {importlib.metadata.version('tflite-micro')} (reference C++ "
        "kernels), Python interpreter, one input per call",
        f"one thread everywhere; {clock} clock (Python: {CLOCKS[clock].__name__}); the "
        f"{'fastest' if STAT[clock] == 'min' else 'median'} forward pass of each engine's "
        "runs, the best of the rounds, engines in turn",
    ]


# ---- the tables ----------------------------------------------------------------------------------


def ms(s: float) -> str:
    return f"{s * 1e3:9.4f}" if s < 0.01 else f"{s * 1e3:9.2f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:7.2f}x"


HEAD = (
    f"  {'op (in>out)':36s} {'count':>5s} {'SIL ms':>9s} {'emu ms':>9s} {'TFLM ms':>9s}"
    f" {'SIL/emu':>8s} {'SIL/TFLM':>8s}"
)


def print_row(r: Row, name: str | None = None, count: str | None = None) -> None:
    flag = "" if r.same else "   MISMATCH (outputs differ)"
    print(
        f"  {(name or r.label)[:36]:36s} {count or str(r.count):>5s} {ms(r.sil)} {ms(r.emu)}"
        f" {ms(r.tflm)} {ratio(r.sil, r.emu)} {ratio(r.sil, r.tflm)}{flag}"
    )


def zo_step(binary: Path, title: str, g, q: int, batch: int, runs: int, work: Path) -> bool:
    """The SIL's ZO step split, the twin's PROBE and APPLY beside it; True if they agree."""
    from hilbench.device import ModelState
    from hilbench.npu.blob import to_blob
    from hilbench.zo import loss
    from hilbench.zo import rng as zrng

    tables = loss.LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    blob = to_blob(g, {"LOSS": tables.to_bytes()})
    r = np.random.default_rng(7)
    n_items = 64
    item = int(np.prod(g.input_shape))
    x = r.integers(-128, 128, (n_items, item)).astype(np.int8)
    y = r.integers(0, int(np.prod(g.output_shape)), n_items).astype(np.uint8)
    paths = [work / "zo.blob", work / "zo.x", work / "zo.y"]
    for p, data in zip(paths, (blob, x.tobytes(), y.tobytes()), strict=True):
        p.write_bytes(data)
    seed = 1
    rep = run_bench(
        binary, "zo", *map(str, paths), "--q", str(q), "--batch", str(batch), "--runs",
        str(runs), "--seed", str(seed),
    )  # fmt: skip
    zo = rep.get("zo")
    probe, apply = split(rep, "probe"), split(rep, "apply")
    check = rep.get("zo_check")
    losses = rep.get("zo_losses")
    sil_lp = [int(v) for v in losses["lp"].split(",")]
    sil_lm = [int(v) for v in losses["lm"].split(",")]

    # the twin: the same PROBE (batch seed = seed, seeds seed..seed+q-1) and APPLYs
    st = ModelState.from_blob(blob)
    seeds = np.arange(seed, seed + q, dtype=np.uint32)
    idx = zrng.batch_indices(seed, n_items, batch)
    xb, yb = x[idx].reshape((-1, *g.input_shape)), y[idx]
    lp, lm = st.probe(xb, yb, seeds, 2)
    coeffs = np.clip(
        (lp.astype(np.int64) - lm.astype(np.int64)) * 64, -(2**24 - 1), 2**24 - 1
    ).astype(np.int32)  # HB_BENCH_COEFF_GAIN, HB_COEFF_LIMIT
    crc0 = st.weights_crc()
    for _ in range(runs):
        st.apply(seeds, coeffs)
    same = (
        lp.tolist()[: len(sil_lp)] == sil_lp
        and lm.tolist()[: len(sil_lm)] == sil_lm
        and crc0 == int(check["crc_initial"], 16)
        and st.weights_crc() == int(check["crc_applied"], 16)
        and check["restored"] == "1"
    )
    t_probe = best_of(lambda: st.probe(xb, yb, seeds, 2), max(2, runs))
    t_apply = best_of(lambda: st.apply(seeds, coeffs), max(2, runs))

    ns = 1e-6  # ns -> ms
    tp, ta = probe["total"], apply["total"]
    share = lambda v, t: f"{v * ns:9.3f} {v / t:5.1%}"  # noqa: E731
    print(
        f"\n{title}: {zo['trained']} trained tensors, {int(zo['weight_elems']):,} weights; "
        f"q={q}, batch {batch}: {zo['n_forward']} forward passes per PROBE; arena "
        f"{int(zo['arena']) / 1024:.0f} KiB; {STAT[clock]} of {runs} runs"
    )
    print(
        f"  PROBE {tp * ns:9.3f} ms  = forward {share(probe['forward'], tp)} + loss "
        f"{share(probe['loss'], tp)} + PRNG {share(probe['prng'], tp)} + perturb "
        f"{share(probe['perturb'], tp)}"
    )
    print(
        f"  APPLY {ta * ns:9.3f} ms  = PRNG {share(apply['prng'], ta)} + update "
        f"{share(apply['update'], ta)}"
    )
    fwd = int(rep.get("zo_time", part="forward")[STAT[clock]])
    print(
        f"  one forward pass {fwd * ns:.3f} ms; ZO beyond inference: PROBE "
        f"{tp / (int(zo['n_forward']) * fwd):.3f}x its forward passes"
    )
    print(
        f"  twin (Python + {_backend_name()}, 2q models batched): PROBE {t_probe * 1e3:.3f} ms, "
        f"APPLY {t_apply * 1e3:.3f} ms; SIL/twin PROBE {tp * 1e-9 / t_probe:.2f}x, APPLY "
        f"{ta * 1e-9 / t_apply:.2f}x; losses and weights CRC "
        + ("equal the twin's" if same else "DIFFER from the twin's")
    )
    return same


def _backend_name() -> str:
    from hilbench.npu.ops import backend as _backend

    return _backend.name()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="turns of the three engines per row")
    ap.add_argument("--budget", type=float, default=0.05, help="seconds per engine per turn")
    ap.add_argument("--q", type=int, default=4, help="seeds per ZO step")
    ap.add_argument("--batch", type=int, default=32, help="PROBE's mini-batch")
    ap.add_argument("--zo-runs", type=int, default=5, help="timed PROBEs and APPLYs")
    ap.add_argument("--fw", type=Path, help="a built hilbench-bench (default: make it)")
    ap.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="monotonic",
        help="elapsed time (default), or each engine's thread CPU time (a shared machine)",
    )
    args = ap.parse_args(argv)
    global clock
    clock = args.clock
    if args.rounds < 1 or args.budget <= 0 or args.zo_runs < 1:
        ap.error("--rounds and --zo-runs must be >= 1 and --budget > 0")
    if not 1 <= args.q <= 510 or not 1 <= args.batch <= 256:
        ap.error("--q must be in 1..510 and --batch in 1..256 (the device's ranges)")
    from threadpoolctl import threadpool_limits

    from hilbench.npu import zoo

    binary = args.fw or build_bench()
    build = run_bench(binary, "info", timeout=30).build
    for line in engines(build):
        print(line)
    graphs = [(title, zoo.build(name, seed=0, **kw)) for title, name, kw in MODELS]
    pool = (POOL_MODEL[0], zoo.build(POOL_MODEL[1], seed=0, **POOL_MODEL[2]))
    rows = op_rows(graphs, pool)
    print(
        f"per op: {len(rows)} single-op blobs (one per op shape); per model: the whole blob; "
        f"{args.rounds} rounds of about {args.budget * 1e3:.0f} ms per engine per row"
    )
    ok = True
    with threadpool_limits(1), tempfile.TemporaryDirectory(prefix="bench_fw_") as tmp:
        work = Path(tmp)
        for i, r in enumerate(rows):
            measure(r, binary, args.rounds, args.budget, work, seed=i)
        whole = []
        for i, (title, g) in enumerate(graphs):
            w = Row(title, g, {title: 1})
            measure(w, binary, args.rounds, args.budget, work, seed=1000 + i)
            whole.append(w)
        for (title, g), w in zip(graphs, whole, strict=True):
            mine = [r for r in rows if r.counts.get(title)]
            print(f"\n{title}: {len(g.ops)} ops, {len(mine)} op shapes")
            print(HEAD)
            for r in mine:
                print_row(r, count=str(r.counts[title]))
            total = Row("", None)
            for attr in ("sil", "emu", "tflm"):
                setattr(total, attr, sum(getattr(r, attr) * r.counts[title] for r in mine))
            print_row(total, "sum of its ops (x count)", str(len(g.ops)))
            print_row(w, "whole model, one blob", str(w.ops))
            ok = ok and w.same and all(r.same for r in mine)
        title = POOL_MODEL[0]
        print(f"\npools ({title}'s max pool; an average pool of the same window):")
        print(HEAD)
        for r in rows:
            if title in r.counts:
                print_row(r, count="1")
                ok = ok and r.same
        print(
            f"\nZO step on the SIL (default ZO method; ms, {STAT[clock]} of {args.zo_runs} runs; "
            "the parts timed alone with the core's functions, the last of each step the rest)"
        )
        for title, g in graphs:
            ok = zo_step(binary, title, g, args.q, args.batch, args.zo_runs, work) and ok
    if not ok:
        print(
            "\nMISMATCH: an engine's output (or the ZO step) differs; the timings above are "
            "not of the same computation"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
