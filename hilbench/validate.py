"""A device against the reference, item by item (``hilbench validate``; ST Edge AI's
``validate`` on a data set, and more: hilbench's devices are meant to be bit-exact).

The reference is TFLM (tflite-micro's interpreter, reference kernels) running the .tflite
file itself; the device is the emulator, the SIL firmware, QEMU or a board, given the model
hilbench imported from that file. Per run: how many outputs are byte-equal; ST's metrics on the
dequantized outputs — ACC (top-1 agreement of device and reference; with labels, each one's
accuracy), RMSE, MAE, L2R (``||dev - ref|| / ||ref||``), COS (cosine similarity); the worst
items by L2 error. :func:`assert_device_matches` is the pytest helper.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from hilbench.errors import HilbenchError, npy_load_reason

BACKENDS = ("emulate", "sil", "qemu", "board")
WORST = 5  # items named in a report


def _runtime() -> Any:
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError:
        raise HilbenchError(
            "validate compares with TFLM, which needs the tflite-micro package",
            "install it with hilbench: pip install -e . (or pip install tflite-micro)",
        ) from None
    return runtime


def tflm_outputs(model: bytes, x: np.ndarray) -> np.ndarray:
    """TFLM's int8 outputs of the .tflite ``model`` (batch 1) for each item of ``x``."""
    runtime = _runtime()
    arena = max(1 << 16, 16 * len(model) + 64 * int(x[0].size if len(x) else 1))
    it = runtime.Interpreter.from_bytes(model, arena_size=arena)
    ys = []
    for item in x:
        it.set_input(item[None], 0)
        it.invoke()
        ys.append(np.asarray(it.get_output(0)).reshape(-1).copy())
    return np.stack(ys) if ys else np.zeros((0, 0), np.int8)


def device_outputs(
    graph: Any, x: np.ndarray, backend: str, *, port: str | None = None, fw: str | None = None
) -> np.ndarray:
    """The int8 outputs (N, outputs) the device ``backend`` computes for ``x``."""
    if backend not in BACKENDS:
        raise HilbenchError(f"unknown backend {backend!r}", f"use one of {', '.join(BACKENDS)}")
    if backend == "emulate":
        parts = [graph.run(x[i : i + 256]) for i in range(0, len(x), 256)]
        y = np.concatenate(parts) if parts else np.zeros((0, *graph.output_shape), np.int8)
    else:
        from hilbench.inference import infer_on_device

        y = infer_on_device(graph, x, backend, port=port, firmware=fw)
    return np.asarray(y, np.int8).reshape(len(x), -1)


@dataclass(frozen=True)
class Metrics:
    """ST's validation metrics of a device against a reference (dequantized outputs)."""

    acc: float  # top-1 agreement
    rmse: float
    mae: float
    l2r: float
    cos: float


def metrics(dev: np.ndarray, ref: np.ndarray) -> Metrics:
    d, r = dev.astype(np.float64), ref.astype(np.float64)
    err = d - r
    nr = float(np.linalg.norm(r))
    nd = float(np.linalg.norm(d))
    cos = float(np.clip(np.sum(d * r) / (nd * nr), -1.0, 1.0)) if nd and nr else float(nd == nr)
    return Metrics(
        acc=float(np.mean(np.argmax(d, 1) == np.argmax(r, 1))) if len(d) else float("nan"),
        rmse=float(np.sqrt(np.mean(err**2))) if err.size else 0.0,
        mae=float(np.mean(np.abs(err))) if err.size else 0.0,
        l2r=float(np.linalg.norm(err) / nr) if nr else float(np.linalg.norm(err) > 0),
        cos=cos,
    )


@dataclass(frozen=True)
class Item:
    index: int
    differing: int  # output bytes that differ
    max_abs: int  # in int8 steps
    l2: float  # of the dequantized error


@dataclass
class Report:
    model: str
    backend: str
    items: int
    outputs: int  # per item
    byte_equal: int  # items whose outputs are byte-equal
    metrics: Metrics
    worst: list[Item]
    scale: float
    zero_point: int
    accuracy: dict[str, float] = field(default_factory=dict)  # with labels: device, reference

    @property
    def bit_exact(self) -> bool:
        return self.byte_equal == self.items

    def within(self, tolerances: dict[str, float]) -> bool:
        """Bit-exact without tolerances; else every given metric bound holds (``rmse``,
        ``mae``, ``l2r`` at most; ``cos``, ``acc`` at least)."""
        if not tolerances:
            return self.bit_exact
        m = asdict(self.metrics)
        return all(m[k] >= v if k in ("cos", "acc") else m[k] <= v for k, v in tolerances.items())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bit_exact": self.bit_exact}


def compare(
    dev: np.ndarray,
    ref: np.ndarray,
    *,
    scale: float,
    zero_point: int,
    model: str = "",
    backend: str = "",
    labels: np.ndarray | None = None,
) -> Report:
    """The report of device outputs ``dev`` against reference outputs ``ref`` (int8, N x K)."""
    if dev.shape != ref.shape:
        raise HilbenchError(
            f"the device gave outputs {dev.shape}, the reference {ref.shape}",
            "this is a bug in hilbench or the firmware: report it",
        )
    dq = (dev.astype(np.float64) - zero_point) * scale
    rq = (ref.astype(np.float64) - zero_point) * scale
    diff = dev.astype(np.int32) - ref.astype(np.int32)
    l2 = np.linalg.norm(dq - rq, axis=1) if len(dev) else np.zeros(0)
    order = np.argsort(-l2, kind="stable")[:WORST]
    worst = [
        Item(int(i), int(np.count_nonzero(diff[i])), int(np.abs(diff[i]).max()), float(l2[i]))
        for i in order
        if l2[i] > 0 or np.count_nonzero(diff[i])
    ]
    acc = {}
    if labels is not None:
        y = np.asarray(labels).reshape(-1)
        if len(y) != len(dev):
            raise HilbenchError(
                f"{len(y)} labels for {len(dev)} items", "give one label per input item"
            )
        acc = {"device": label_accuracy(dev, y), "reference": label_accuracy(ref, y)}
    return Report(
        model=model,
        backend=backend,
        items=len(dev),
        outputs=int(dev.shape[1]) if dev.ndim == 2 else 0,
        byte_equal=int(np.sum(np.all(diff == 0, axis=1))) if len(dev) else 0,
        metrics=metrics(dq, rq),
        worst=worst,
        scale=scale,
        zero_point=zero_point,
        accuracy=acc,
    )


def load_labels(path: Any, n: int) -> np.ndarray:
    """y.npy: one integer label per item (N,) or (N, 1), for ``n`` items; a HilbenchError (one
    line, exit 2) naming what is wrong otherwise."""
    try:
        y = np.load(path, allow_pickle=False)
    except OSError as e:
        raise HilbenchError(f"cannot read {path}: {e.strerror or e}", "check the path") from None
    except (ValueError, EOFError) as e:
        raise HilbenchError(
            f"{path} is not a .npy array of labels ({npy_load_reason(e)})",
            "save the labels, integers of shape (N,), with numpy.save",
        ) from None
    if not isinstance(y, np.ndarray) or not np.issubdtype(y.dtype, np.integer):
        what = y.dtype if isinstance(y, np.ndarray) else "several arrays"
        raise HilbenchError(
            f"{path} holds {what}, expected integer labels of shape ({n},)",
            "save one integer class index per input item",
        )
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.shape != (n,):
        raise HilbenchError(
            f"{path} holds labels of shape {y.shape} for {n} items",
            f"give one label per input item: shape ({n},)",
        )
    return y


def label_accuracy(outputs: np.ndarray, labels: np.ndarray) -> float:
    """Top-1 accuracy of int8 outputs (N, ...) against labels (N,): the arg-max of each item's
    flattened output (the lowest index on ties, as the device's EVAL) equals its label."""
    flat = np.asarray(outputs).reshape(len(outputs), -1)
    if not len(flat):
        return 0.0
    return float(np.mean(np.argmax(flat, 1) == np.asarray(labels).reshape(-1)))


def validate(
    model: bytes,
    x: np.ndarray,
    *,
    backend: str = "emulate",
    labels: np.ndarray | None = None,
    port: str | None = None,
    fw: str | None = None,
    name: str = "model.tflite",
) -> Report:
    """The .tflite ``model`` on device ``backend`` against TFLM, on int8 inputs ``x``."""
    from hilbench.npu.tflite import import_tflite

    graph = import_tflite(model, name)
    x = np.asarray(x, np.int8).reshape(len(x), *graph.input_shape)
    ref = tflm_outputs(model, x)
    dev = device_outputs(graph, x, backend, port=port, fw=fw)
    q = graph.tensors[graph.output].qparams
    return compare(
        dev,
        ref.reshape(dev.shape),
        scale=float(q.scale[0]),
        zero_point=int(q.zero_point[0]),
        model=name,
        backend=backend,
        labels=labels,
    )


@dataclass(frozen=True)
class LayerDiff:
    index: int
    kind: str
    output: str
    differing: int  # bytes that differ over all items
    size: int


def compare_layers(graph: Any, x: np.ndarray, reference: Any | None = None) -> list[LayerDiff]:
    """Every op's output on the emulator against TFLM's running ``reference`` (default: the
    same graph; hilbench's export of it, all tensors preserved), over the items of ``x``; beyond
    ST's report, which compares outputs only. A device returns outputs only, so this is the
    emulator's."""
    from hilbench.npu.tflite import export_tflite_indexed

    runtime = _runtime()
    ours = graph.run_all(x)
    model, index = export_tflite_indexed(graph if reference is None else reference, 1)
    acts = sum(int(np.prod(t.shape)) for t in graph.tensors.values() if t.data is None)
    it = runtime.Interpreter.from_bytes(
        model,
        arena_size=max(1 << 16, 16 * len(model) + 64 * int(x[0].size)) + 2 * acts,
        intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors,
    )
    theirs: dict[str, list[np.ndarray]] = {op.outputs[0]: [] for op in graph.ops}
    for item in x:
        it.set_input(item[None], 0)
        it.invoke()
        for name in theirs:
            got = it.GetTensor(index[name], 0)
            theirs[name].append(np.asarray(got["tensor_data"] if isinstance(got, dict) else got))
    out = []
    for i, op in enumerate(graph.ops):
        name = op.outputs[0]
        a = np.asarray(ours[name]).reshape(len(x), -1)
        b = np.stack(theirs[name]).reshape(len(x), -1)
        out.append(LayerDiff(i, op.kind, name, int(np.count_nonzero(a != b)), int(a.size)))
    return out


def format_layers(diffs: list[LayerDiff]) -> str:
    first = next((d for d in diffs if d.differing), None)
    head = (
        "layers: every intermediate tensor equals TFLM's"
        if first is None
        else f"layers: first difference at layer {first.index} ({first.kind} -> '{first.output}')"
    )
    rows = [f"  {d.index:3d} {d.kind:20s} {d.output[:30]:30s} {d.differing:>8,} of {d.size:,}"
            for d in diffs]  # fmt: skip
    return "\n".join([head, *rows])


def format_text(r: Report) -> str:
    m = r.metrics
    out = [
        f"{r.model} on {r.backend} against TFLM: {r.items} items, {r.outputs} outputs each",
        f"  byte-equal: {r.byte_equal} of {r.items}"
        + ("  (bit-exact)" if r.bit_exact else "  (NOT bit-exact)"),
        f"  ACC (top-1 agreement) {m.acc:.4f}  RMSE {m.rmse:.6g}  MAE {m.mae:.6g}  "
        f"L2R {m.l2r:.6g}  COS {m.cos:.6f}  (dequantized: scale {r.scale:.6g}, "
        f"zero point {r.zero_point})",
    ]
    if r.accuracy:
        out.append(
            f"  accuracy against the labels: device {r.accuracy['device']:.4f}, "
            f"reference {r.accuracy['reference']:.4f}"
        )
    for it in r.worst:
        out.append(
            f"  worst: item {it.index}: {it.differing} of {r.outputs} bytes differ, "
            f"up to {it.max_abs} steps, L2 {it.l2:.6g}"
        )
    return "\n".join(out)


def assert_device_matches(
    model: bytes, x: np.ndarray, backend: str = "emulate", **tolerances: float
) -> Report:
    """pytest helper: the device's outputs byte-equal TFLM's (or within ``tolerances``);
    an AssertionError naming the worst items otherwise."""
    r = validate(model, x, backend=backend)
    assert r.within(tolerances), format_text(r)
    return r
