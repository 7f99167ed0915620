"""NPU emulator speed: per-forward time of the bit-exact int8 emulator vs TFLM's interpreter
(reference kernels) vs LiteRT's default interpreter (XNNPACK), on the same .tflite, one thread.

    python benchmarks/bench_npu.py [--repeat 20] [--sets 16]

"ours" is the default backend (the compiled numba kernels, ``jit``); the numpy reference
path is timed too, for one input, as "ours (numpy)".

Models: MobileNetV2 (alpha 0.35, 96x96) and ResNet18 (width 0.25, 64x64), 10 classes, random
He-normal float weights quantized with calibration data. Three timings per model:

- one input, one forward: ours vs TFLM vs LiteRT (targets: >= 20x TFLM, >= 0.7x LiteRT);
- ``--sets`` perturbed weight sets on one input, run batched in one call, per forward pass,
  vs LiteRT's single forward (target: >= 1x LiteRT).

Best of ``--repeat`` runs (TFLM: fewer, it is slow). Peak memory: Python-side allocations of
one forward (tracemalloc: numpy temporaries) for ours; the arena for TFLM; the resident-size
growth of creating and running the interpreter for LiteRT.
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from hilbench.npu import zoo
from hilbench.npu.graph import Graph
from hilbench.npu.ops import _backend
from hilbench.npu.tflite import export_tflite

MODELS = [
    ("MobileNetV2 a0.35 96x96", "mobilenet_v2", {"alpha": 0.35, "resolution": 96}),
    ("ResNet18 w0.25 64x64", "resnet18", {"width": 0.25, "resolution": 64}),
]
TARGETS = {"tflm": 20.0, "litert": 0.7, "batched": 1.0}


def best_of(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
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


def ours(g: Graph, x: np.ndarray, ov: dict[str, np.ndarray], repeat: int) -> dict[str, float]:
    with _backend.use("numpy"):
        ref = best_of(lambda: g.run(x), max(3, repeat // 4))
    one = best_of(lambda: g.run(x), repeat)
    sets = len(next(iter(ov.values())))
    batched = best_of(lambda: g.run(x, ov), max(3, repeat // 4)) / sets
    tracemalloc.start()
    g.run(x)
    peak_one = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    g.run(x, ov)
    peak_batched = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "one": one,
        "numpy": ref,
        "batched": batched,
        "mem": peak_one,
        "mem_batched": peak_batched,
    }


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
    return {"one": best_of(run, repeat), "mem": mem}


def verdict(ratio: float, target: float) -> str:
    return "met" if ratio >= target else "MISSED"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--sets", type=int, default=16)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with threadpool_limits(1):
        blas = threadpool_limits(1).get_original_num_threads()
        print(f"one thread (threadpoolctl; BLAS pools: {blas}); best of {args.repeat}")
        print(f"ours: backend {_backend.name()!r}")
        for title, name, kw in MODELS:
            g = zoo.build(name, seed=0, **kw)
            x = rng.integers(-128, 128, (1, *g.input_shape)).astype(np.int8)
            model = export_tflite(g, 1)
            ov = perturbed_sets(g, args.sets, rng)
            a = ours(g, x, ov, args.repeat)
            t = tflm(model, x, args.repeat)
            lt = litert(model, x, args.repeat)
            mib = {
                k: v / 2**20
                for k, v in (
                    ("a", a["mem"]),
                    ("b", a["mem_batched"]),
                    ("t", t["mem"]),
                    ("l", lt["mem"]),
                )
            }
            print(
                f"\n{title}: {len(g.ops)} ops, {g.num_parameters():,} parameters, "
                f".tflite {len(model) / 1024:.0f} KiB"
            )
            print(f"  ours   one input      {a['one'] * 1e3:8.2f} ms   peak {mib['a']:6.1f} MiB")
            print(f"  ours (numpy path)     {a['numpy'] * 1e3:8.2f} ms")
            print(
                f"  ours   {args.sets} sets batched {a['batched'] * 1e3:8.2f} ms/pass  "
                f"peak {mib['b']:6.1f} MiB"
            )
            print(f"  TFLM   one input      {t['one'] * 1e3:8.2f} ms   arena {mib['t']:5.1f} MiB")
            print(f"  LiteRT one input      {lt['one'] * 1e3:8.2f} ms   RSS +{mib['l']:5.1f} MiB")
            r_tflm = t["one"] / a["one"]
            r_lite = lt["one"] / a["one"]
            r_batch = lt["one"] / a["batched"]
            print(
                f"  ratio ours vs TFLM (one input):       {r_tflm:6.2f}x  target >= 20x   "
                f"{verdict(r_tflm, TARGETS['tflm'])}"
            )
            print(
                f"  ratio ours vs LiteRT (one input):     {r_lite:6.2f}x  target >= 0.7x  "
                f"{verdict(r_lite, TARGETS['litert'])}"
            )
            print(
                f"  ratio ours vs LiteRT (per pass, {args.sets} batched): {r_batch:6.2f}x  "
                f"target >= 1x    {verdict(r_batch, TARGETS['batched'])}"
            )


if __name__ == "__main__":
    main()
