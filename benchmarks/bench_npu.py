"""NPU emulator speed: per-forward time of the bit-exact int8 emulator's backends vs TFLM's
interpreter (reference kernels) vs LiteRT's default interpreter (XNNPACK), on the same .tflite,
one thread, side by side in one run.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_npu.py [--repeat 20] [--sets 16]

It first says what it runs on: the CPU (model and vector extensions), the kernel table the
native engine picks there, the tables it can run, and the int8 multiply-add peak of one
thread with the picked table's instruction (measured now). Every row names the ISA it ran:

- ``native``: the C engine, a whole network per call, with the best table this CPU runs
  (AVX-512 VNNI, AVX-VNNI, AVX2, ARM64 dot products); ``native-<isa>``: each other table the
  CPU runs, forced (e.g. ``native-portable``: the portable C path; ``native-portable-avx2``:
  the same C compiled for AVX2);
- ``jit``: numba per-op kernels (LLVM code for the host CPU; float32 BLAS GEMMs);
- ``numpy``: the reference path (BLAS GEMMs);
- TFLM (reference C++ kernels, scalar) and LiteRT (XNNPACK, which picks its own kernels for
  this CPU).

The ratios and targets are for the default backend (``native`` when built).

Models: MobileNetV2 (alpha 0.35, 96x96) and ResNet18 (width 0.25, 64x64), 10 classes, random
He-normal float weights quantized with calibration data. Two timings per backend:

- one input, one forward (targets: >= 20x TFLM, >= 1x LiteRT: issue 25);
- ``--sets`` perturbed weight sets on one input, run batched in one call, per forward pass,
  vs LiteRT's single forward (target: >= 1.3x LiteRT).

The ratios against LiteRT come from a second measurement in which every SIMD table of the
native engine (one input, batched) and LiteRT take turns in blocks of runs, round by round,
so that a busy machine slows them all alike: each table's ratios side by side. LiteRT picks
its own kernels for the CPU (on an AVX-512 CPU its AVX-512 ones, also against our forced
AVX2 table). The TFLM ratio uses the first measurement.

Then ZO-step sizes (N inputs x ``--sets`` sets per call, as the twin's PROBE runs them) for
the digits MLP and CNN and the two large models at 32x32: native vs jit, ms per call, and
native's multiply-add rate (convolutions, depthwise, fully connected) as a share of the peak.

Best of ``--repeat`` runs (TFLM and the slow backends: fewer), CPU time of the calling
thread (``time.thread_time``; one thread everywhere, so the same as wall time on an idle
machine, and robust on a shared one). Peak memory: Python-side
allocations (tracemalloc, numpy buffers included) of a first call, one input and batched,
on a fresh copy of the graph (so the native backend's lowering, op list and arena, are
counted); the arena for TFLM; the resident-size growth of creating and running the
interpreter for LiteRT.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import time
import tracemalloc
from collections.abc import Callable, Iterator

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from hilbench.npu import cost, native, zoo
from hilbench.npu.graph import Graph
from hilbench.npu.ops import backend
from hilbench.npu.tflite import export_tflite

MODELS = [
    ("MobileNetV2 a0.35 96x96", "mobilenet_v2", {"alpha": 0.35, "resolution": 96}),
    ("ResNet18 w0.25 64x64", "resnet18", {"width": 0.25, "resolution": 64}),
]
TARGETS = {"tflm": 20.0, "litert": 1.0, "batched": 1.3}  # issue 25
# ZO-step sizes: one call = N inputs x S perturbed weight sets (the digits models and the
# two large ones at CI resolution)
ZO_CASES = [
    ("MLP", "mlp", {}, 64),
    ("CNN", "cnn", {}, 64),
    ("MobileNetV2 a0.35 32x32", "mobilenet_v2", {"alpha": 0.35, "resolution": 32}, 32),
    ("ResNet18 w0.25 32x32", "resnet18", {"width": 0.25, "resolution": 32}, 32),
]


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Shortest CPU time of this thread (every engine here computes in the calling thread):
    on a shared machine, time other processes take from this one does not count; on an
    idle one it is the wall time."""
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t)
    return best


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def perturbed_sets(g: Graph, sets: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for n in g.trainable():
        w = g.tensors[n].data.astype(np.int16)
        u = rng.choice(np.array([-1, 1], np.int16), (sets, *w.shape))
        out[n] = np.clip(w + u, -127, 127).astype(np.int8)
    return out


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """One of our backends; ``native-<isa>`` is native with that kernel table forced."""
    if name.startswith("native-"):
        with backend.use("native"), native.use_isa(name.removeprefix("native-")):
            yield
    else:
        with backend.use(name), native.use_isa("auto"):
            yield


def cpu() -> tuple[str, list[str]]:
    """The CPU's model name and the vector extensions that matter here (Linux)."""
    name, flags = platform.processor() or platform.machine(), set()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            key, _, val = line.partition(":")
            if key.strip() == "model name" and name == (platform.processor() or platform.machine()):
                name = val.strip()
            if key.strip() in ("flags", "Features") and not flags:
                flags = set(val.split())
    wanted = ("sse4_2", "avx2", "fma", "avx_vnni", "avx512f", "avx512bw", "avx512vl",
              "avx512_vnni", "avx512vbmi", "asimd", "asimddp", "i8mm", "sve")  # fmt: skip
    return name, [f for f in wanted if f in flags]


def isa_of(name: str) -> str:
    """What a backend variant runs on."""
    if name == "native":
        return native.best_isa()
    if name.startswith("native-"):
        return name.removeprefix("native-")
    if name == "jit":
        try:
            import llvmlite.binding as llvm

            return f"LLVM {llvm.get_host_cpu_name()}"
        except ImportError:
            return "numba"
    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    return f"BLAS {blas[0].get('architecture')}" if blas else "BLAS"


def peak(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def ours(
    g: Graph, x: np.ndarray, ov: dict[str, np.ndarray], repeat: int, name: str
) -> dict[str, float]:
    slow = name in ("numpy", "native-portable")
    sets = len(next(iter(ov.values())))
    with variant(name):
        one = best_of(lambda: g.run(x), max(3, repeat // 4) if slow else repeat)
        batched = best_of(lambda: g.run(x, ov), 2 if slow else max(3, repeat // 4)) / sets
        # first calls on fresh copies (no lowered plan yet): plan + arena + outputs
        mem = peak(lambda: g.with_constants({}).run(x))
        mem_batched = peak(lambda: g.with_constants({}).run(x, ov))
    return {"one": one, "batched": batched, "mem": mem, "mem_batched": mem_batched}


def tflm(model: bytes, x: np.ndarray, repeat: int) -> dict[str, float]:
    from tflite_micro.python.tflite_micro import runtime

    arena = 4 * 1024 * 1024
    it = runtime.Interpreter.from_bytes(model, arena_size=arena)

    def run() -> None:
        it.set_input(x, 0)
        it.invoke()

    return {"one": best_of(run, max(2, repeat // 5)), "mem": arena}


def litert(model: bytes, x: np.ndarray, repeat: int) -> dict[str, float]:
    from ai_edge_litert.interpreter import Interpreter

    before = rss_bytes()
    it = Interpreter(model_content=model, num_threads=1)
    it.allocate_tensors()
    idx = it.get_input_details()[0]["index"]

    def run() -> None:
        it.set_tensor(idx, x)
        it.invoke()

    run()
    mem = rss_bytes() - before
    return {"one": best_of(run, repeat), "mem": mem, "run": run}


def interleaved(
    fns: dict[str, Callable[[], object]], rounds: int, block: int = 4
) -> dict[str, float]:
    """Best thread CPU time of each function, the functions taking turns in blocks of
    ``block`` runs (so that each runs with its own data in cache, as when timed alone) for
    ``rounds`` rounds: on a shared machine whatever slows one slows the others as much, so
    ratios between them hold better than between loops timed one after the other."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()  # back in cache
            for _ in range(block):
                t = time.thread_time()
                fn()
                best[name] = min(best[name], time.thread_time() - t)
    return best


def _in(name: str, fn: Callable[[], object]) -> object:
    with variant(name):
        return fn()


def verdict(ratio: float, target: float) -> str:
    return "met" if ratio >= target else "MISSED"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--sets", type=int, default=16)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    names = ["jit", "numpy"]
    if native.available():
        best = native.best_isa()
        forced = [f"native-{i}" for i in native.runnable_isas() if i != best]
        names = ["native", *forced, *names]
    default = backend.name()
    model_name, flags = cpu()
    with threadpool_limits(1):
        blas = threadpool_limits(1).get_original_num_threads()
        print(f"CPU: {model_name} ({platform.machine()}; {' '.join(flags) or 'no flags read'})")
        print(
            f"one thread (threadpoolctl; BLAS pools: {blas}); best of {args.repeat}, "
            "thread CPU time"
        )
        if native.available():
            pk = native.peak_macs_per_s(native.best_isa())
            print(
                f"native engine: {native.best_isa()} (runs here: "
                f"{', '.join(native.runnable_isas())}); int8 multiply-add peak of one thread "
                f"with its instruction: {pk / 1e9:.1f} GMAC/s"
            )
        else:
            print(f"native engine: not built ({native.IMPORT_ERROR})")
        print(f"default backend {default!r}")
        for title, name, kw in MODELS:
            g = zoo.build(name, seed=0, **kw)
            x = rng.integers(-128, 128, (1, *g.input_shape)).astype(np.int8)
            model = export_tflite(g, 1)
            ov = perturbed_sets(g, args.sets, rng)
            res = {n: ours(g, x, ov, args.repeat, n) for n in names}
            t = tflm(model, x, args.repeat)
            lt = litert(model, x, args.repeat)
            print(
                f"\n{title}: {len(g.ops)} ops, {g.num_parameters():,} parameters, "
                f".tflite {len(model) / 1024:.0f} KiB"
            )
            print(
                f"  {'':22s} {'ISA':17s} {'one input':>10s} {f'{args.sets} sets/pass':>13s}"
                f"   peak MiB (first call / batched)"
            )
            for n, a in res.items():
                print(
                    f"  {n:22s} {isa_of(n):17s} {a['one'] * 1e3:7.3f} ms "
                    f"{a['batched'] * 1e3:10.3f} ms"
                    f"   {a['mem'] / 2**20:6.2f} / {a['mem_batched'] / 2**20:6.2f}"
                )
            print(
                f"  {'TFLM':22s} {'reference C++':17s} {t['one'] * 1e3:7.3f} ms {'':13s}"
                f"   arena {t['mem'] / 2**20:.1f}"
            )
            lite_mib = lt["mem"] / 2**20
            print(
                f"  {'LiteRT':22s} {'XNNPACK (own)':17s} {lt['one'] * 1e3:7.3f} ms {'':13s}"
                f"   RSS +{lite_mib:.1f}"
            )
            # the ratios: each SIMD table of the native engine (the default backend
            # first) and LiteRT timed in turn, round by round, side by side in one run
            turn = [default, *[n for n in names if n.startswith("native-") and "portable" not in n]]
            fns: dict[str, Callable[[], object]] = {"litert": lt["run"]}
            for n in turn:
                fns[f"{n} one"] = lambda g=g, x=x, n=n: _in(n, lambda: g.run(x))
                fns[f"{n} batched"] = lambda g=g, x=x, ov=ov, n=n: _in(n, lambda: g.run(x, ov))
            pair = interleaved(fns, max(3, args.repeat // 4))
            lite = pair["litert"]
            r_tflm = t["one"] / pair[f"{default} one"]
            print(
                f"  timed in turn with LiteRT ({lite * 1e3:.3f} ms); "
                f"{default} ({isa_of(default)}) vs TFLM (one input): {r_tflm:.2f}x  "
                f"target >= {TARGETS['tflm']:g}x  {verdict(r_tflm, TARGETS['tflm'])}"
            )
            print(
                f"  {'vs LiteRT':22s} {'ISA':17s} {'one input':>10s} {'ratio':>7s} "
                f"{f'{args.sets} sets/pass':>13s} {'ratio':>7s}   targets >= "
                f"{TARGETS['litert']:g}x / {TARGETS['batched']:g}x"
            )
            for n in turn:
                one, batched = pair[f"{n} one"], pair[f"{n} batched"] / args.sets
                r1, rb = lite / one, lite / batched
                print(
                    f"  {n:22s} {isa_of(n):17s} {one * 1e3:7.3f} ms {r1:6.2f}x "
                    f"{batched * 1e3:10.3f} ms {rb:6.2f}x   "
                    f"{verdict(r1, TARGETS['litert'])} / {verdict(rb, TARGETS['batched'])}"
                )

        zo_step(args, rng, names)


def mac_count(g: Graph) -> int:
    """Multiply-adds of one forward in its convolutions, depthwise convs and FC layers."""
    kinds = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
    return sum(c.macs for c in cost.layer_costs(g) if c.kind in kinds)


def zo_step(args: argparse.Namespace, rng: np.random.Generator, names: list[str]) -> None:
    """Per call of N inputs x S sets, our fast backends (no reference point elsewhere), and
    native's multiply-add rate against the peak of its instruction."""
    fast = [n for n in names if n in ("native", "jit")]
    pk = native.peak_macs_per_s(native.best_isa()) if "native" in fast else None
    print(f"\nZO step: N inputs x {args.sets} perturbed sets in one call, ms per call")
    head = " ".join(f"{n:>9s}" for n in fast)
    print(f"  {'model':26s} {'N':>3s} {head}   native GMAC/s (share of the peak)")
    for title, name, kw, n in ZO_CASES:
        g = zoo.build(name, seed=0, **kw)
        x = rng.integers(-128, 128, (n, *g.input_shape)).astype(np.int8)
        ov = perturbed_sets(g, args.sets, rng)
        row = []
        for b in fast:
            with variant(b):
                row.append(best_of(lambda g=g, x=x, ov=ov: g.run(x, ov), max(3, args.repeat // 4)))
        rate = ""
        if pk:
            gmacs = mac_count(g) * n * args.sets / row[0] / 1e9
            rate = f"   {gmacs:6.1f} ({gmacs * 1e9 / pk:4.0%})"
        print(f"  {title:26s} {n:3d} " + " ".join(f"{t * 1e3:9.2f}" for t in row) + rate)
    if pk:
        print(f"  peak: {pk / 1e9:.1f} GMAC/s ({native.best_isa()}'s multiply-add, one thread)")


if __name__ == "__main__":
    main()
