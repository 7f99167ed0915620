"""Where the native engine stands against LiteRT (XNNPACK), op by op, on the models of
``bench_npu.py``: one thread, one input, the same .tflite.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.bench_npu_ops [--repeat 200] [--model NAME]

- native: each op's shortest time inside the engine over ``--repeat`` whole-model calls
  (``_engine.profile``: the call's Python path and the weights' check are not in any op;
  they are printed apart), and, batched, the repacking of one perturbed weight set's GEMM
  panels, which LiteRT never pays (its weights are packed once when the model loads);
- LiteRT: each op alone as a one-op .tflite (its weights, quantization and shapes), the
  shortest ``invoke`` less LiteRT's invoke floor, the shortest invoke of the model's last
  op alone (FULLY_CONNECTED 1280 -> 10 on MobileNetV2: about 13 k multiply-adds, a small
  fraction of a microsecond). ADD takes two activations and has no one-input model: its
  rows show native only. (Differences of models cut after op i and op i - 1 were tried
  first: the cut model's output leaving the delegate costs more for larger outputs, which
  made those differences negative.)

The per-kind totals say whether the gap to a target ratio sits in one kind of kernel or
spreads over all of them. It prints the CPU and the native kernel table it ran.
"""

from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks.bench_npu import MODELS, best_of, cpu, perturbed_sets
from hilbench.npu import native, zoo
from hilbench.npu.graph import Graph
from hilbench.npu.tflite import export_tflite


def native_ops(g: Graph, x: np.ndarray, ov: dict, repeat: int) -> tuple[list[float], float, float]:
    """Each op's shortest time in the engine (s), one set's repacking (s, batched) and
    the shortest whole call (s, one input)."""
    engine = native.engine_module()
    call = best_of(lambda: g.run(x), repeat)
    engine.profile(True)
    for _ in range(repeat):
        g.run(x)
    per_op = engine.profile(False)[: len(g.ops)]
    engine.profile(True)
    for _ in range(max(2, repeat // 16)):
        g.run(x, ov)
    repack = engine.profile(False)[-1]
    return [t / 1e9 for t in per_op], repack / 1e9, call


def alone(g: Graph, op_index: int) -> Graph | None:
    """Op op_index of g as a one-op model (None for ops of two activations)."""
    op = g.ops[op_index]
    if sum(1 for n in op.inputs if n and g.tensors[n].data is None) != 1:
        return None
    names = {n for n in (*op.inputs, *op.outputs) if n}
    return Graph(
        tensors={n: g.tensors[n] for n in names},
        ops=[op],
        input=op.inputs[0],
        output=op.outputs[0],
        name=f"{g.name}.op{op_index}",
    )


def litert_invoke(model: Graph, repeat: int, rng: np.random.Generator) -> float:
    """Shortest LiteRT invoke (s) of a one-input model on a random input."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=export_tflite(model, 1), num_threads=1)
    it.allocate_tensors()
    x = rng.integers(-128, 128, (1, *model.tensors[model.input].shape)).astype(np.int8)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    return best_of(it.invoke, repeat)


def shape(g: Graph, name: str) -> str:
    return "x".join(map(str, g.tensors[name].shape))


def report(title: str, g: Graph, x: np.ndarray, ov: dict, repeat: int) -> None:
    rng = np.random.default_rng(1)
    ours, repack, call = native_ops(g, x, ov, repeat)
    floor = litert_invoke(alone(g, len(g.ops) - 1), repeat, rng)
    print(
        f"\n{title}: {len(g.ops)} ops; microseconds; LiteRT: each op alone, less its invoke "
        f"floor ({floor * 1e6:.2f})"
    )
    print(f"  {'op':>3} {'kind':18s} {'in -> out':28s} {'native':>8} {'LiteRT':>8} {'ratio':>6}")
    kinds: dict[str, list[float]] = {}
    maps: dict[str, list[float]] = {}
    last = len(g.ops) - 1
    for i, op in enumerate(g.ops):
        a = ours[i] * 1e6
        model = alone(g, i) if i < last else None
        b = None if model is None else max(litert_invoke(model, repeat, rng) - floor, 0.0) * 1e6
        io = f"{shape(g, op.inputs[0])} -> {shape(g, op.outputs[0])}"
        if b is None:
            why = "(the floor)" if i == last else "(two inputs)"
            print(f"  {i:3d} {op.kind:18s} {io:28s} {a:8.2f} {'-':>8}  {why}")
            continue
        out = g.tensors[op.outputs[0]].shape
        side = f"{out[0]}x{out[1]}" if len(out) == 3 else "1x1"
        for table, key in ((kinds, op.kind), (maps, side)):
            k = table.setdefault(key, [0.0, 0.0, 0])
            k[0], k[1], k[2] = k[0] + a, k[1] + b, k[2] + 1
        print(f"  {i:3d} {op.kind:18s} {io:28s} {a:8.2f} {b:8.2f} {b / a:5.2f}x")
    for what, table, order in (
        ("kind", kinds, lambda kv: -kv[1][0]),
        ("output map", maps, lambda kv: -int(kv[0].split("x")[0])),
    ):
        print(f"  by {what}, ops with a one-op model (LiteRT / native; > 1: native faster)")
        for key, (a, b, n) in sorted(table.items(), key=order):
            print(f"    {key:18s} {n:3d} ops  native {a:8.1f}  LiteRT {b:8.1f}  {b / a:5.2f}x")
    whole = litert_invoke(g, repeat, rng)
    alone_sum = sum(b for _, b, _ in kinds.values())
    print(
        f"  LiteRT: whole model {whole * 1e6:.1f}; its ops alone {alone_sum:.1f} + one floor "
        f"{floor * 1e6:.1f} = {alone_sum + floor * 1e6:.1f} (ops of two inputs not included)"
    )
    print(
        f"  native: ops {sum(ours) * 1e6:.1f}, whole call {call * 1e6:.1f} (the rest: the "
        f"Python path and the weights' check); one perturbed set's repacking {repack * 1e6:.1f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--model", choices=[m[1] for m in MODELS], default=None)
    args = ap.parse_args()
    if not native.available():
        raise SystemExit(f"bench_npu_ops: {native.IMPORT_ERROR}")
    rng = np.random.default_rng(0)
    name, flags = cpu()
    print(f"CPU: {name} ({' '.join(flags) or 'no flags read'}); native table {native.best_isa()}")
    with threadpool_limits(1):
        for title, model, kw in MODELS:
            if args.model not in (None, model):
                continue
            g = zoo.build(model, seed=0, **kw)
            x = rng.integers(-128, 128, (1, *g.input_shape)).astype(np.int8)
            report(title, g, x, perturbed_sets(g, 16, rng), args.repeat)


if __name__ == "__main__":
    main()
