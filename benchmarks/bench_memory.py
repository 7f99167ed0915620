"""Device memory per ZO step (issue 11 s6): for each zoo model, the RAM a device needs for
inference alone, for a ZO step with each master, and for backpropagation, side by side, and
whether it fits the STM32N6's on-chip SRAM or needs the PSRAM. Optionally (``--time``) the time
cost of the design that makes a step cheap -- a PROBE never writes the weights, it produces
each perturbed weight row as the kernels read it -- measured on the SIL build.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_memory.py                # memory (~2 min)
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_memory.py --only small   # MLP, CNN, MBv2 32
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_memory.py --time --baseline REV

Memory, every figure as the C firmware places it (docs/firmware.md "Memory: one arena"):

- weights: the blob, ``pad16(len)``, which the device keeps and reads in place (the
  constants' bytes are printed beside it); activations: the planner's region
  (``hilbench.device.plan.act_bytes``, the mirror of device_fw/core/plan.c);
- ZO work area (``hilbench.zo.zocf.zo_work_bytes``, equal to the C's ``hb_model_work_bytes``
  by the golden vectors; its parts: ``zocf.memory_bytes``): per trained weight tensor its
  master, ``pad16`` each (q16: 4 B per weight, int16: 2 B, int8: none -- the weights are
  their own master); the pool, ``pad16(P)``; the row buffer, ``pad16`` of the longest
  trained row; the delta table; the depthwise row cache (fresh samples on a depthwise
  filter); the trained tensors' records and scales -- everything of the ZO code that grows
  with the model. The ZO method is the default one (every weight tensor, Rademacher, fresh
  samples); "+pool" adds a pool of P = the longest trained row, the smallest pool that
  serves every layer;
- static RAM of the core, measured: every core/*.c, nn/*.c, zo/*.c compiled for the
  Cortex-M55 with arm-none-eabi-gcc -O2, .data + .bss per object (arm-none-eabi-size): the
  protocol's buffers and the graph's tables count for inference, the ZO code's statics
  (model.c, zo/, commands.c: the last PROBE's seeds, a perturbed pass's state) only for a ZO
  step. Seeds, coefficients and losses stay in the request and response buffers, which
  inference has too, and APPLY's chunk sums use the response buffer. The core's image
  (.text with .rodata, and .data) is taken off the on-chip SRAM before fitting;
- backpropagation, for comparison, under these assumptions: every activation is kept for the
  backward pass (each its own int8 buffer: the sum of all activations, not the plan's shared
  region), plus one gradient per trained weight (the same tensors the ZO step trains) of 4
  bytes -- int32 or fp32, which are the same size, so both columns are printed and equal --
  and the blob and the core's inference statics. No optimiser state, no activation gradients:
  a lower bound.

Fit: the total plus the core's image against ``hilbench.npu.cost.SRAM_BYTES`` (4.2 MB); "S"
on-chip SRAM, "P" needs the 32 MB PSRAM (weights there), "-" not even that.

Time (``--time``): PROBE through the SIL program (``hilbench-sil``, the core with a Linux HAL,
built by make) on the MLP, the CNN and MobileNetV2 (alpha 0.35, 32x32), for two ZO methods
(the default; uniform samples with adaptive scales on weights and biases, int8 master): the
CPU time the SIL process spends on the request (/proc/PID/schedstat, so a busy host's waiting
time is not counted; the fastest of ``--reps``), beside the same number of plain forward passes
(an EVAL of 2 q B items). With ``--baseline REV`` the SIL is also built from the git revision
REV (its device_fw/ tree, exported with git archive into a temporary directory) and timed the
same way in turn, and the ratio after/before is printed.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hilbench import analysis
from hilbench.npu import cost, zoo
from hilbench.npu.blob import to_blob
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "device_fw" / "core"
KIB = 1024
PSRAM_BYTES = 32 * 2**20  # the STM32N6570-DK's PSRAM on XSPI1
MODELS = [
    ("MLP", "mlp", {}),
    ("CNN", "cnn", {}),
    ("MobileNetV2 a0.35 32x32", "mobilenet_v2", {"alpha": 0.35, "resolution": 32}),
    ("MobileNetV2 a0.35 96x96", "mobilenet_v2", {"alpha": 0.35, "resolution": 96}),
    ("ResNet18 w0.25 64x64", "resnet18", {"width": 0.25, "resolution": 64}),
    ("MobileNetV2 a1.0 96x96", "mobilenet_v2", {"alpha": 1.0, "resolution": 96}),
    ("ResNet18 w1.0 64x64", "resnet18", {"width": 1.0, "resolution": 64}),
]
SMALL = 3  # --only small: the first three (the models the SIL tests train)
M55_CC = "arm-none-eabi-gcc"
M55_FLAGS = ("-std=c11", "-O2", "-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard")
# which core sources a ZO step needs beyond inference (commands.c: the last PROBE's seeds,
# which APPLY_PROBED and APPLY_PROBE apply along)
ZO_SOURCES = ("model.c", "commands.c")
ZO_DIRS = ("zo",)
PROTOCOL_SOURCES = ("device.c", "frame.c", "store.c", "crc32.c", "hb_status.c", "msg.c")


def pad16(n: int) -> int:
    return zocf.pad16(n)


def kib(n: int) -> str:
    return f"{n / KIB:,.1f}"


# ------------------------------------------------------------------------ static RAM


@dataclass(frozen=True)
class CoreStatic:
    """The core's static RAM by part and its image, measured on the Cortex-M55 build."""

    protocol: int  # .data + .bss of the protocol's sources
    graph: int  # the graph's tables (graph.c, blob.c, plan.c, nn/)
    zo: int  # the ZO code's statics (model.c, zo/, commands.c)
    image: int  # .text (with .rodata) + .data of every core object
    compiler: str

    @property
    def inference(self) -> int:
        return self.protocol + self.graph


def core_static(cc: str = M55_CC) -> CoreStatic:
    """Compile the core for the Cortex-M55 and read each object's sizes (arm-none-eabi-size,
    Berkeley format: text includes .rodata)."""
    size_tool = cc.replace("gcc", "size")
    for tool in (cc, size_tool):
        if shutil.which(tool) is None:
            sys.exit(
                f"bench_memory: {tool} not found; the static RAM is measured on the Cortex-M55 "
                "build (Debian: apt install gcc-arm-none-eabi binutils-arm-none-eabi)"
            )
    sources = sorted(CORE.glob("*.c")) + sorted(CORE.glob("nn/*.c")) + sorted(CORE.glob("zo/*.c"))
    parts = {"protocol": 0, "graph": 0, "zo": 0}
    image = 0
    with tempfile.TemporaryDirectory() as tmp:
        objects = []
        for i, src in enumerate(sources):
            obj = Path(tmp) / f"{i}_{src.stem}.o"
            cmd = [
                cc,
                *M55_FLAGS,
                f"-I{CORE}",
                f"-I{CORE / 'gen'}",
                f"-I{CORE.parent / 'port'}",
                "-c",
                str(src),
                "-o",
                str(obj),
            ]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                rel = src.relative_to(ROOT)
                sys.exit(f"bench_memory: {rel} does not build for the M55:\n{done.stderr}")
            objects.append((src, obj))
        out = subprocess.run(
            [size_tool, *(str(o) for _, o in objects)], capture_output=True, text=True, check=True
        ).stdout.splitlines()[1:]
    for (src, _), line in zip(objects, out, strict=True):
        text, data, bss = (int(v) for v in line.split()[:3])
        rel = src.relative_to(CORE)
        if rel.parts[0] in ZO_DIRS or (rel.name in ZO_SOURCES and len(rel.parts) == 1):
            part = "zo"
        elif rel.name in PROTOCOL_SOURCES and len(rel.parts) == 1:
            part = "protocol"
        else:
            part = "graph"
        parts[part] += data + bss
        image += text + data
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    return CoreStatic(**parts, image=image, compiler=version.splitlines()[0])


# ------------------------------------------------------------------------ per model


@dataclass(frozen=True)
class ModelMemory:
    """A row of the table: the library's figures (hilbench.analysis.ModelMemory, read through
    it: consts, blob, act, work, ...) under a label, plus the core's measured static RAM."""

    label: str
    m: analysis.ModelMemory

    def __getattr__(self, name: str) -> Any:
        if name == "m":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.m, name)

    def inference(self, st: CoreStatic) -> int:
        return self.m.blob + self.m.act + st.inference

    def step(self, st: CoreStatic, master: str, pool: bool = False) -> int:
        return self.inference(st) + self.m.work[master] + (self.m.pool if pool else 0) + st.zo

    def backprop(self, st: CoreStatic) -> int:
        return self.m.backprop + st.inference


def model_memory(label: str, name: str, kw: dict) -> ModelMemory:
    """The library's figures (hilbench.analysis.model_memory) with the row's label."""
    return ModelMemory(label, analysis.model_memory(zoo.build(name, seed=0, **kw)))


def where(total: int, st: CoreStatic) -> str:
    if total + st.image <= cost.SRAM_BYTES:
        return "S"
    return "P" if total + st.image <= cost.SRAM_BYTES + PSRAM_BYTES else "-"


def print_memory(rows: list[ModelMemory], st: CoreStatic) -> list[str]:
    """The table; returns the models whose int8 step misses 1.1x of inference."""
    print(
        f"core static RAM, measured: {st.compiler}, {' '.join(M55_FLAGS)}, "
        ".data + .bss per object (arm-none-eabi-size):"
    )
    print(
        f"  protocol buffers {kib(st.protocol)} KiB, graph tables {kib(st.graph)} KiB "
        f"(inference: {kib(st.inference)} KiB); ZO code {kib(st.zo)} KiB (a step only); "
        f"core image (.text + .rodata + .data) {kib(st.image)} KiB, a port adds its own"
    )
    budget = cost.SRAM_BYTES - st.image
    print(
        f"on-chip SRAM {cost.SRAM_BYTES:,} B less the core image: {budget:,} B; "
        f"S = fits there, P = needs the {PSRAM_BYTES // 2**20} MB PSRAM"
    )
    print("KiB (1024 B); x = ratio to inference; method: every weight tensor, Rademacher, fresh")
    head = (
        f"{'model':<24} {'consts':>8} {'blob':>8} {'act':>7} {'inference':>11} {'row':>5} "
        f"{'ZO int8':>11} {'x':>5} {'x arena':>7} {'+pool':>6} {'x':>5} {'ZO int16':>11} {'x':>5} "
        f"{'ZO q16':>11} {'x':>5} {'BP int32':>11} {'x':>5} {'BP fp32':>11} {'x':>5}"
    )
    print(head)
    print("-" * len(head))
    missed = []
    for r in rows:
        inf = r.inference(st)

        def cell(total: int, width: int = 9) -> str:
            return f"{kib(total):>{width}} {where(total, st)}"

        def ratio(total: int, inf: int = inf) -> str:
            return f"{total / inf:>5.2f}"

        i8 = r.step(st, "int8")
        i8p = r.step(st, "int8", pool=True)
        arena = (r.blob + r.act + r.work["int8"]) / (r.blob + r.act)
        bp = r.backprop(st)
        print(
            f"{r.label:<24} {kib(r.consts):>8} {kib(r.blob):>8} {kib(r.act):>7} {cell(inf)} "
            f"{r.row:>5} {cell(i8)} {ratio(i8)} {arena:>7.3f} {r.pool:>6} {ratio(i8p)} "
            f"{cell(r.step(st, 'int16'))} {ratio(r.step(st, 'int16'))} "
            f"{cell(r.step(st, 'q16'))} {ratio(r.step(st, 'q16'))} "
            f"{cell(bp)} {ratio(bp)} {cell(bp)} {ratio(bp)}"
        )
        if i8 > 1.1 * inf:
            missed.append(
                f"{r.label}: the int8 step is {i8 / inf:.2f}x inference ({kib(i8 - inf)} KiB more, "
                f"of which {kib(st.zo)} KiB the ZO code's statics and "
                f"{kib(r.work['int8'])} KiB its work area; model parts alone {arena:.3f}x)"
            )
    print(
        "row = the row buffer (the longest trained row, bytes); +pool = a pool of P = that row "
        "(bytes, pad16) on the int8 step; x arena = (blob + act + ZO work) / (blob + act), the "
        "model's part without the static RAM"
    )
    print(
        "BP: backpropagation kept every activation (int8, each its own buffer) and a 4-byte "
        "gradient per trained weight; int32 and fp32 gradients are both 4 bytes: the two "
        "columns are equal"
    )
    print_parts(rows)
    return missed


def print_parts(rows: list[ModelMemory]) -> None:
    """The int8 master's ZO work area by part (bytes, unpadded; the arena pads each to 16)."""
    names = list(rows[0].parts)
    print("int8 ZO work area by part (bytes, unpadded; zocf.memory_bytes), and its arena bytes:")
    head = f"{'model':<24}" + "".join(f" {n:>11}" for n in names) + f" {'arena':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        cells = "".join(f" {r.parts[n]:>11,}" for n in names)
        print(f"{r.label:<24}{cells} {r.work['int8']:>8,}")


# ------------------------------------------------------------------------ PROBE time

TIME_MODELS = MODELS[:SMALL]
TIME_METHODS = {
    "default": {},
    "uniform+biases,int8": {"layers": "all", "distribution": "uniform", "master": "int8"},
}
TIME_WORK = {"mlp": (8, 32), "cnn": (8, 32), "mobilenet_v2": (4, 8)}  # (q, batch)


def build_sil(source_root: Path, build: Path) -> Path:
    done = subprocess.run(
        ["make", "-s", "-C", str(source_root / "device_fw"), "host", f"BUILD={build}"],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        sys.exit(f"bench_memory: building the SIL in {source_root} failed:\n{done.stderr}")
    return build / "host" / "hilbench-sil"


def baseline_sil(rev: str, tmp: Path) -> Path:
    """The SIL program built from revision rev's device_fw/ (git archive into tmp)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "device_fw"], capture_output=True
    )
    if archive.returncode:
        sys.exit(f"bench_memory: --baseline {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
    return build_sil(tmp, tmp / "build")


def _sil_cpu_ns(binary: Path) -> int:
    """CPU time (ns, /proc/PID/schedstat) of this process's child running ``binary``: the SIL
    program's own work, which time spent waiting for a core on a busy host does not inflate."""
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[1] == me and Path(stat.parent / "exe").resolve() == binary.resolve():
                return int((stat.parent / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue  # a process that ended meanwhile, or one we may not read
    sys.exit(f"bench_memory: the SIL program {binary} is not a child of this process")


def time_probe(binary: Path, name: str, kw: dict, method: dict, reps: int) -> tuple[float, float]:
    """(PROBE, 2 q B plain forward passes by EVAL): the SIL program's CPU seconds per request,
    the fastest of reps."""
    from hilbench.backend.sil import SilBackend
    from hilbench.protocol import data_blob

    g = zoo.build(name, seed=3, **kw)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    blob = to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": zocf.build(g, **method).to_bytes()})
    q, batch = TIME_WORK[name]
    items, classes = 2 * q * batch, math.prod(g.output_shape)
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (items, math.prod(g.input_shape))).astype(np.int8)
    y = rng.integers(0, classes, items).astype(np.uint8)
    probe, plain = [], []
    with SilBackend(str(binary)) as t:
        t.load_model(blob)
        t.load_data_blob(0, data_blob.encode(x, y, classes))
        for r in range(reps):
            seeds = rng.integers(0, 2**32, q, dtype=np.uint64).astype(np.uint32)
            c0 = _sil_cpu_ns(binary)
            t.probe(slot=0, batch_size=batch, batch_seed=r, eps=2, seeds=seeds)
            c1 = _sil_cpu_ns(binary)
            t.evaluate(0, items)
            c2 = _sil_cpu_ns(binary)
            probe.append((c1 - c0) / 1e9)
            plain.append((c2 - c1) / 1e9)
    return min(probe), min(plain)


def print_time(binaries: dict[str, Path], reps: int) -> None:
    names = list(binaries)
    print(
        f"PROBE on the SIL ({platform.processor() or platform.machine()}): the SIL program's CPU "
        f"time per request, the fastest of {reps}; 'plain' = 2 q B unperturbed forward passes "
        "(EVAL)"
    )
    head = f"{'model':<24} {'method':<20} {'q x B':>6}"
    for n in names:
        head += f" {n + ' PROBE':>16} {'plain':>9} {'PROBE/plain':>11}"
    if len(names) == 2:
        head += f" {names[1] + '/' + names[0]:>16}"
    print(head)
    print("-" * len(head))
    for label, name, kw in TIME_MODELS:
        for mname, method in TIME_METHODS.items():
            q, batch = TIME_WORK[name]
            line = f"{label:<24} {mname:<20} {f'{q}x{batch}':>6}"
            probes = []
            for n in names:  # in turn, so a busy machine slows both alike
                p, e = time_probe(binaries[n], name, kw, method, reps)
                probes.append(p)
                line += f" {p * 1e3:>13.2f} ms {e * 1e3:>6.2f} ms {p / e:>11.2f}"
            if len(names) == 2:
                line += f" {probes[1] / probes[0]:>16.2f}"
            print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=("small", "all"), default="all")
    ap.add_argument("--time", action="store_true", help="also time PROBE on the SIL build")
    ap.add_argument("--baseline", metavar="REV", help="git revision to time beside this tree")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    if args.baseline and not args.time:
        ap.error("--baseline needs --time")
    if args.reps < 1:
        ap.error(f"--reps {args.reps}: give at least 1")
    st = core_static()
    models = MODELS[:SMALL] if args.only == "small" else MODELS
    rows = []
    for label, name, kw in models:
        t0 = time.perf_counter()
        rows.append(model_memory(label, name, kw))
        print(f"  built {label} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    missed = print_memory(rows, st)
    for m in missed:
        print(f"MISSED 1.1x: {m}")
    if not missed:
        print("every model's int8-master step is within 1.1x of its inference memory")
    if args.time:
        print()
        with tempfile.TemporaryDirectory() as tmp:
            binaries = {}
            if args.baseline:
                binaries[f"@{args.baseline}"] = baseline_sil(args.baseline, Path(tmp))
            binaries["this tree"] = build_sil(ROOT, ROOT / "device_fw" / "build")
            print_time(binaries, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
