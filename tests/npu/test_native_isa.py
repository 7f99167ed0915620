"""Every kernel table of the native engine, each forced in turn, against the numpy reference
path (itself byte-equal to TFLM in the oracle tests): random single-op models of every op
kind, random FULLY_CONNECTED layers, whole models layer by layer, batched weight sets.

Parametrised over every ISA any build knows (``native.KNOWN_ISAS``): a table this build
does not have (another architecture's) or this CPU does not run is reported as a skip that
says so, never passed silently. Needs no TFLM, so it also runs where tflite-micro has no
wheel (ARM64 Linux: ``python -m hilbench.npu.native.qemu_arm64`` runs it under
qemu-aarch64, docs/npu.md)."""

from __future__ import annotations

import os
import platform
import sys
import sysconfig

import numpy as np
import pytest

from hilbench.npu import native, zoo
from hilbench.npu.graph import Graph, Op, QParams, Tensor
from hilbench.npu.ops import backend
from hilbench.npu.ops import fully_connected as fc

from . import cases

# where the engine must be built (CI on x86-64 Linux; ARM64 Linux under emulation)
REQUIRED = sys.platform.startswith("linux") and platform.machine() in (
    "x86_64",
    "AMD64",
    "aarch64",
)
# The oracle's single-op cases (test_oracle_ops.py: same generators, counts, chunks and
# seeds). By default the first cases of each kind's first chunk (the oracle itself runs all
# of them against TFLM on every table this CPU runs); HILBENCH_NATIVE_ISA_CASES=oracle runs
# them all (where TFLM has no wheel, e.g. under qemu-aarch64: native == numpy there and
# numpy == TFLM on x86-64 make native == TFLM on the oracle's cases), and 400 FC cases.
ORACLE = os.environ.get("HILBENCH_NATIVE_ISA_CASES", "") == "oracle"
ORACLE_COUNTS = {
    "conv": 400,
    "depthwise": 300,
    "avg_pool": 150,
    "max_pool": 150,
    "mean": 150,
    "add": 150,
    "reshape": 50,
}
CHUNK = 50
FIRST = {"conv": 50, "depthwise": 50, "avg_pool": 15, "max_pool": 20, "mean": 15, "add": 25}
CHUNKS = [
    (kind, chunk)
    for kind, n in ORACLE_COUNTS.items()
    for chunk in range(-(-n // CHUNK) if ORACLE else int(kind in FIRST))
]
FC_CASES = 400 if ORACLE else 60
ARM64_TABLES = ("neondot",)  # the ARM64-only tables (the portable C is in every build)


def _cpu_name() -> str:
    """The CPU's model name (Linux), or the architecture (and QEMU's CPU model when run
    under qemu-user, whose /proc/cpuinfo is the host's)."""
    arch = platform.machine()
    emulated = os.environ.get("QEMU_CPU")
    if emulated:
        return f"{arch}, qemu-user -cpu {emulated}"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":")[0].strip() in ("model name", "CPU part"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or arch


def _require(isa: str) -> None:
    if not native.available():
        if REQUIRED:
            pytest.fail(f"native engine missing: {native.IMPORT_ERROR}")
        pytest.skip(f"native engine not built here: {native.IMPORT_ERROR}")
    if isa not in native.isas():
        elsewhere = (
            "; test_native_arm64.py runs it under qemu-aarch64"
            if isa in ARM64_TABLES and sysconfig.get_platform() == "linux-x86_64"
            else ""
        )
        pytest.skip(f"{isa}: not in this build ({platform.machine()}){elsewhere}")
    if isa not in native.runnable_isas():
        pytest.skip(f"{isa}: this CPU ({_cpu_name()}) does not run these kernels, not tested here")


def _equal_to_reference(g: Graph, x: np.ndarray, isa: str, ov=None, what: str = "") -> None:
    with backend.use("numpy"):
        want = g.run_all(x, ov)
    with backend.use("native"), native.use_isa(isa):
        got = g.run_all(x, ov)
    for op in g.ops:  # the first layer that differs
        name = op.outputs[0]
        a, b = got[name], want[name]
        if not np.array_equal(a, b):
            idx = np.argwhere(a != b)[:3].tolist()
            pytest.fail(
                f"{isa} {what}: first mismatch at {op.kind} -> {name}, "
                f"{int((a != b).sum())} of {a.size} bytes differ, e.g. at {idx}: "
                f"ours {[int(a[tuple(i)]) for i in idx]} vs reference "
                f"{[int(b[tuple(i)]) for i in idx]}"
            )


@pytest.mark.parametrize("isa", native.KNOWN_ISAS)
@pytest.mark.parametrize(("kind", "chunk"), CHUNKS)
def test_random_single_op_models(isa, kind, chunk):
    _require(isa)
    rng = np.random.default_rng([sorted(cases.CASES).index(kind), chunk])
    n = min(CHUNK, ORACLE_COUNTS[kind] - chunk * CHUNK) if ORACLE else FIRST[kind]
    for i in range(n):
        g, x = cases.CASES[kind](rng)
        _equal_to_reference(g, x, isa, what=f"{kind} chunk {chunk} case {i}")


def _fc_case(rng: np.random.Generator) -> tuple[Graph, np.ndarray]:
    """A FULLY_CONNECTED layer: K from 1 to 700, 1 to 80 outputs, per-channel or per-tensor
    weights, bias or none, any activation; the output scale from the real accumulator range
    (sometimes a tenth of it: multipliers above 1, left shifts)."""
    k = int(rng.choice([1, 2, 3, 5, 8, 16, 31, 64, 65, 127, 300, 700]))
    m = int(rng.integers(1, 81))
    x = rng.integers(-128, 128, (int(rng.integers(1, 6)), k)).astype(np.int8)
    w = cases._weights(rng, (m, k))
    in_s, in_zp = float(np.float32(rng.uniform(0.005, 0.1))), int(rng.integers(-128, 128))
    per_channel = rng.random() < 0.5
    w_s = rng.uniform(1e-3, 2e-2, m if per_channel else 1).astype(np.float32)
    axis = 0 if per_channel else None
    zeros = np.zeros(w_s.size, np.int32)
    acc = (x.astype(np.int64) - in_zp) @ w.T.astype(np.int64)
    bias = None
    if rng.random() < 0.7:
        bias = rng.integers(-1, 2, m) * rng.integers(0, int(np.abs(acc).max()) + 2, m)
        acc = acc + bias
    real = np.abs(acc * np.broadcast_to(in_s * w_s, (m,))).max()
    act = str(rng.choice(["NONE", "RELU", "RELU6"]))
    out_s = float(np.float32(max(real, 1e-3) / 127 * rng.uniform(0.5, 1.5)))
    if rng.random() < 0.1:
        out_s /= 10
    out_zp = int(rng.integers(-20, 21)) if act == "NONE" else -128
    if act == "RELU6":
        out_s = min(out_s, 6.0 / 255)
    t = {
        "x": Tensor("x", (k,), "int8", QParams([in_s], [in_zp])),
        "w": Tensor("w", (m, k), "int8", QParams(w_s, zeros, axis), w),
        "y": Tensor("y", (m,), "int8", QParams([out_s], [out_zp])),
    }
    inputs = ["x", "w"]
    if bias is not None:
        b_s = (np.float32(in_s) * w_s).astype(np.float32)
        t["b"] = Tensor("b", (m,), "int32", QParams(b_s, zeros, axis), bias.astype(np.int32))
        inputs.append("b")
    p = fc.prepare(in_s, in_zp, w_s, out_s, out_zp, act)
    g = Graph(t, [Op(fc.KIND, inputs, ["y"], p)], "x", "y", "fc")
    g.validate()
    return g, x


@pytest.mark.parametrize("isa", native.KNOWN_ISAS)
def test_random_fully_connected(isa):
    _require(isa)
    rng = np.random.default_rng(77)
    for i in range(FC_CASES):
        g, x = _fc_case(rng)
        _equal_to_reference(g, x, isa, what=f"FC case {i}")


MODELS = [
    ("mlp", {}),
    ("cnn", {}),
    ("mobilenet_v2", {"alpha": 0.35, "resolution": 32, "classes": 5}),
    ("resnet18", {"width": 0.25, "resolution": 32}),
]


@pytest.mark.parametrize("isa", native.KNOWN_ISAS)
@pytest.mark.parametrize(("name", "kw"), MODELS)
def test_models_layer_by_layer_with_batched_sets(isa, name, kw):
    """Three inputs; then 3 perturbed weight-and-bias sets batched on them, and on one
    input (the engine's shared-prefix path)."""
    _require(isa)
    g = zoo.build(name, seed=11, **kw)
    rng = np.random.default_rng(12)
    x = rng.integers(-128, 128, (3, *g.input_shape)).astype(np.int8)
    _equal_to_reference(g, x, isa, what=name)
    ov = {}
    for wn, bn in g.weight_tensors():
        w = g.tensors[wn].data.astype(np.int16)
        ov[wn] = np.clip(w + rng.integers(-2, 3, (3, *w.shape)), -127, 127).astype(np.int8)
        b = g.tensors[bn].data.astype(np.int64)
        ov[bn] = (b + rng.integers(-500, 501, (3, *b.shape))).astype(np.int32)
    _equal_to_reference(g, x, isa, ov, what=f"{name}, 3 sets batched")
    _equal_to_reference(g, x[:1], isa, ov, what=f"{name}, 3 sets on one input")
