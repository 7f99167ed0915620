"""Calibrate the Cortex-M55 cost model (hilbench.npu.cost) on the firmware's own kernels:
executed instructions under QEMU ``-icount`` of single-op graphs, fitted per op kind.

    python benchmarks/calibrate_m55.py [--json OUT.json] [--models mlp,cnn,mb32,mb48]

It builds the Helium benchmark image (``make -C device_fw an547-bench AN547_NN=mve``, the
kernels every M55 firmware runs), takes one single-op graph per op *shape* of the listed zoo
models (benchmarks/bench_firmware.py's rows) and runs one forward pass of each under
``qemu-system-arm -M mps3-an547 -icount shift=5`` (one tick ~ one instruction). Per op kind
it fits, by non-negative least squares,

    instructions = call + per_mac * MACs + per_out * output elements

and prints the constants to paste into ``cost.M55_FIT``, each row's measured and fitted
count, and the whole models' measured instructions against the sum of the fitted rows. Every
output is checked against the emulator byte for byte (a MISMATCH row exits 1).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_an547 import ELF, ROOT, BenchError, Row, measure, qemu_version, run_image
from bench_firmware import cpu, op_rows

from hilbench.launch.make import output_tail, run_make

MODELS = {
    "mlp": ("MLP", "mlp", {}),
    "cnn": ("CNN", "cnn", {}),
    "mb32": ("MobileNetV2 a0.35 32x32", "mobilenet_v2", {"alpha": 0.35, "resolution": 32}),
    "mb48": ("MobileNetV2 a0.5 48x48", "mobilenet_v2", {"alpha": 0.5, "resolution": 48}),
}
SHIFT = 5


def build_mve() -> Path:
    status, output = run_make(ROOT, "an547-bench", "AN547_NN=mve")
    if status != 0:
        raise BenchError(f"make an547-bench failed: {output_tail(output)}")
    return ROOT / "device_fw" / "build" / "an547" / ELF


def features(g) -> tuple[str, int, int, int]:
    from hilbench.npu import cost

    c = cost.layer_costs(g)[0]
    return c.kind, c.macs, c.out_bytes, c.taps


def fit(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Per kind: non-negative least squares of instructions on (1, MACs, taps, outputs),
    relative (each row weighted by 1/measured) so that small and large shapes count alike."""
    from scipy.optimize import nnls

    out = {}
    for kind in sorted({r["kind"] for r in rows}):
        rs = [r for r in rows if r["kind"] == kind]
        a = np.array([[1.0, r["macs"], r["taps"], r["outs"]] for r in rs]) / np.array(
            [[r["instr"]] for r in rs]
        )
        coef, _ = nnls(a, np.ones(len(rs)))
        out[kind] = {"call": coef[0], "per_mac": coef[1], "per_tap": coef[2], "per_out": coef[3]}
    return out


def predict(f: dict[str, float], macs: int, outs: int, taps: int) -> float:
    return f["call"] + f["per_mac"] * macs + f["per_tap"] * taps + f["per_out"] * outs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--json", type=Path, help="write rows and fit here")
    args = ap.parse_args(argv)
    from hilbench.npu import zoo

    names = [m for m in args.models.split(",") if m]
    try:
        version = qemu_version()
        elf = build_mve()
    except BenchError as exc:
        print(f"calibrate_m55: {exc}", file=sys.stderr)
        return 2
    print(f"host CPU (runs QEMU; figures do not depend on it): {cpu()}")
    print(f"target: Cortex-M55 (QEMU mps3-an547), {version}, -icount shift={SHIFT}, Helium")
    build = run_image(elf, ["info"], SHIFT)[0].build
    print(f"firmware: {build['compiler']}, {build['flags']}")
    graphs = [(MODELS[m][0], zoo.build(MODELS[m][1], seed=0, **MODELS[m][2])) for m in names]
    rows = [Row(r.label, r.graph, r.counts) for r in op_rows(graphs, None)]
    ok = True
    data: list[dict] = []
    wholes: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="calibrate_m55_") as tmp:
        work = Path(tmp)
        for i, r in enumerate(rows):
            measure(r, {"mve": elf}, work, 1, SHIFT, seed=i)
            kind, macs, outs, taps = features(r.graph)
            data.append({"label": r.label, "kind": kind, "macs": macs, "outs": outs, "taps": taps,
                         "instr": r.instr["mve"], "counts": r.counts, "same": r.same})  # fmt: skip
            ok = ok and r.same
            print(f"  measured {r.label:40s} {r.instr['mve']:>12,}", flush=True)
        for i, (title, g) in enumerate(graphs):
            whole = Row(title, g, {title: 1})
            measure(whole, {"mve": elf}, work, 1, SHIFT, seed=1000 + i)
            wholes.append({"title": title, "instr": whole.instr["mve"], "ops": len(g.ops)})
            ok = ok and whole.same
    coef = fit(data)
    print("\nfit: instructions = call + per_mac * MACs + per_tap * taps + per_out * outputs")
    for kind, f in coef.items():
        print(f"  {kind:20s} call {f['call']:10.1f}  per_mac {f['per_mac']:.4f}  "
              f"per_tap {f['per_tap']:.4f}  per_out {f['per_out']:.3f}")  # fmt: skip
    print(f"\n  {'op':40s} {'MACs':>10s} {'measured':>12s} {'fitted':>12s} {'err':>7s}")
    for r in data:
        p = predict(coef[r["kind"]], r["macs"], r["outs"], r["taps"])
        print(f"  {r['label'][:40]:40s} {r['macs']:10,} {r['instr']:12,} {p:12,.0f} "
              f"{p / r['instr'] - 1:+7.1%}{'' if r['same'] else '  MISMATCH'}")  # fmt: skip
    print(f"\n  {'model':28s} {'measured':>12s} {'sum fitted':>12s} {'err':>7s}")
    for w in wholes:
        s = sum(
            predict(coef[r["kind"]], r["macs"], r["outs"], r["taps"])
            * r["counts"].get(w["title"], 0)
            for r in data
        )
        print(f"  {w['title']:28s} {w['instr']:12,} {s:12,.0f} {s / w['instr'] - 1:+7.1%}")
    if args.json:
        args.json.write_text(json.dumps({"rows": data, "wholes": wholes, "fit": coef}, indent=1))
    if not ok:
        print("\nMISMATCH: an output differs from the emulator's")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
