"""int8 ``.tflite`` in and out, through the flatbuffer schema and model editor that
``tflite-micro`` ships (no hand-written parser).

- :func:`export_tflite` writes a :class:`Graph` as a .tflite model with a fixed batch size.
- :func:`import_tflite` reads an int8 .tflite model into a validated :class:`Graph`; float or
  unsupported ops name the op and the layer, quantization that breaks TFLite's rules names the
  rule, and a malformed file says so — each a one-line :class:`ModelError`.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu import registry
from hilbench.npu.graph import Graph, Op, QParams, Tensor

_INSTALL = "pip install -e . installs TFLite Micro (tflite-micro), which this needs"


def schema() -> tuple[ModuleType, ModuleType]:
    """(schema_py_generated, model_editor) from tflite-micro; ModelError if not installed."""
    try:
        from tflite_micro.tensorflow.lite.micro.compression import model_editor
        from tflite_micro.tensorflow.lite.micro.python import schema_py_generated
    except ImportError:
        raise ModelError(
            "reading or writing .tflite needs the tflite-micro package", _INSTALL
        ) from None
    return schema_py_generated, model_editor


# --- export --------------------------------------------------------------------------------
def _quant(me: ModuleType, q: QParams) -> Any:
    scales = [float(s) for s in q.scale]
    zps = [int(z) for z in q.zero_point]
    if q.axis is None:
        return me.Quantization(scales[0], zps[0])
    return me.Quantization(scales, zps, axis=q.axis)


def export_tflite_indexed(
    graph: Graph, batch: int = 1, description: str | None = None
) -> tuple[bytes, dict[str, int]]:
    """The .tflite bytes of ``graph`` (batch ``batch``) and each graph tensor's index in the
    flatbuffer's subgraph (for per-layer comparison). ``description`` goes into the model's
    description field (default: ``hilbench export of NAME``)."""
    if not 1 <= int(batch) <= 65536:
        raise ModelError(f"batch size {batch} is out of range", "export with a batch of 1 to 65536")
    tfl, me = schema()
    graph.validate()
    model = me.Model(description=description or f"hilbench export of {graph.name}")
    sg = model.add_subgraph(name=graph.name)
    made: dict[str, Any] = {}
    for name, t in graph.tensors.items():
        shape = t.shape if t.data is not None else (batch, *t.shape)
        kw: dict[str, Any] = {
            "shape": shape,
            "name": name,
            "dtype": getattr(tfl.TensorType, t.dtype.upper()),
        }
        if t.qparams is not None:
            kw["quantization"] = _quant(me, t.qparams)
        if t.data is not None:
            kw["data"] = np.ascontiguousarray(t.data).astype(t.data.dtype.newbyteorder("<"))
        made[name] = sg.add_tensor(**kw)
    for i, op in enumerate(graph.ops):
        out_shape = (batch, *graph.tensors[op.outputs[0]].shape)
        how = registry.get(op.kind).tflite_export(tfl, op.params, out_shape)
        inputs = [made[n] for n in op.inputs]
        for suffix, value in how.constants:  # what TFLite takes as inputs, we as params
            inputs.append(
                sg.add_tensor(
                    shape=value.shape,
                    dtype=tfl.TensorType.INT32,
                    name=f"op{i}_{suffix}",
                    data=value,
                )
            )
        o = sg.add_operator(
            opcode=getattr(tfl.BuiltinOperator, op.kind),
            inputs=inputs,
            outputs=[made[n] for n in op.outputs],
        )
        o._fb.builtinOptionsType, o._fb.builtinOptions = how.options_type, how.options
    sg.inputs = [made[graph.input]]
    sg.outputs = [made[graph.output]]
    data = bytes(model.build())
    return data, {n: made[n].index for n in graph.tensors}


def export_tflite(graph: Graph, batch: int = 1, description: str | None = None) -> bytes:
    """The .tflite bytes of ``graph`` with a fixed batch size."""
    return export_tflite_indexed(graph, batch, description)[0]


def activation_name(code: int) -> str:
    names = {0: "NONE", 1: "RELU", 3: "RELU6"}
    if code not in names:
        raise KeyError(code)
    return names[code]


# --- import --------------------------------------------------------------------------------
#: the op kinds a .tflite model may use, as unsupported-op errors list them
SUPPORTED_OPS = tuple(registry.REGISTRY)
_ACT_CODES = {0: "NONE", 1: "RELU", 3: "RELU6"}
_DTYPES = {"INT8": ("int8", "<i1"), "INT32": ("int32", "<i4")}


def _names(enum_cls: type) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_")}


class _Reader:
    """Turns one parsed subgraph into graph tensors and ops, naming layers in errors."""

    def __init__(self, tfl: ModuleType, model: Any, path: str) -> None:
        self.tfl, self.model, self.path = tfl, model, path
        self.sg = model.subgraphs[0]
        self.type_names = _names(tfl.TensorType)
        self.op_names = _names(tfl.BuiltinOperator)
        self.tensors: dict[str, Tensor] = {}
        self.names: dict[int, str] = {}

    def fail(self, cause: str, fix: str) -> ModelError:
        return ModelError(f"{self.path}: {cause}", fix)

    def opname(self, op: Any) -> str:
        code = self.model.operatorCodes[op.opcodeIndex]
        b = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
        if b == self.tfl.BuiltinOperator.CUSTOM:
            custom = (
                code.customCode.decode() if isinstance(code.customCode, bytes) else code.customCode
            )
            return f"CUSTOM({custom})"
        return self.op_names.get(b, f"builtin #{b}")

    def tensor_name(self, idx: int) -> str:
        if idx not in self.names:
            raw = self.sg.tensors[idx].name
            name = (raw.decode() if isinstance(raw, bytes) else raw) or f"tensor{idx}"
            while name in self.names.values():
                name = f"{name}#{idx}"
            self.names[idx] = name
        return self.names[idx]

    def tensor(self, idx: int, layer: str, activation: bool) -> str:
        """Declare tensor ``idx`` (activations lose their batch axis); returns its name."""
        name = self.tensor_name(idx)
        if name in self.tensors:
            return name
        t = self.sg.tensors[idx]
        tname = self.type_names.get(t.type, str(t.type))
        if tname not in _DTYPES:
            kind = "a float model" if tname.startswith("FLOAT") else f"a {tname} tensor"
            raise self.fail(
                f"{layer}: tensor '{name}' is {tname} ({kind}); only int8 "
                "activations/weights and int32 biases are supported",
                "convert the model with full-integer int8 quantization",
            )
        shape = tuple(int(d) for d in (t.shape if t.shape is not None else ()))
        buf = self.model.buffers[t.buffer].data if t.buffer else None
        data = None
        dtype, np_dtype = _DTYPES[tname]
        if buf is not None and len(buf):
            raw = np.asarray(buf, dtype=np.uint8).tobytes()
            need = math.prod(shape) * np.dtype(np_dtype).itemsize
            if len(raw) != need:
                raise self.fail(
                    f"{layer}: tensor '{name}' holds {len(raw)} bytes, shape {shape} needs {need}",
                    "the file is malformed; re-export it",
                )
            data = np.frombuffer(raw, np_dtype).astype(dtype).reshape(shape)
        elif activation:
            if not shape or shape[0] < 1:
                raise self.fail(
                    f"{layer}: activation '{name}' has shape {shape}, expected a "
                    "leading batch axis",
                    "export the model with a batch axis",
                )
            shape = shape[1:] or (1,)
        qp = None
        q = t.quantization
        if q is not None and q.scale is not None and len(q.scale):
            zps = list(q.zeroPoint) if q.zeroPoint is not None and len(q.zeroPoint) else [0]
            axis = int(q.quantizedDimension) if len(q.scale) > 1 else None
            qp = QParams(np.asarray(q.scale, np.float32), np.asarray(zps, np.int32), axis)
        self.tensors[name] = Tensor(name, shape, dtype, qp, data)
        return name

    def qparams(self, name: str, layer: str) -> tuple[float, int]:
        q = self.tensors[name].qparams
        if q is None or q.scale.size != 1:
            raise self.fail(
                f"{layer}: activation '{name}' must be per-tensor quantized (TFLite int8 rule)",
                "quantize activations per tensor",
            )
        return float(q.scale[0]), int(q.zero_point[0])

    def activation(self, opts: Any, layer: str) -> str:
        code = int(getattr(opts, "fusedActivationFunction", 0) or 0)
        if code not in _ACT_CODES:
            raise self.fail(
                f"{layer}: fused activation code {code} unsupported", "use NONE, RELU or RELU6"
            )
        return _ACT_CODES[code]

    def op(self, i: int, op: Any) -> Op:
        kind = self.opname(op)
        out_idx = list(op.outputs if op.outputs is not None else [])
        out_name = self.tensor_name(out_idx[0]) if out_idx else "?"
        layer = f"layer {i} ({kind} -> '{out_name}')"
        if kind not in SUPPORTED_OPS:
            raise self.fail(
                f"{layer}: unsupported op {kind}", f"use only {', '.join(SUPPORTED_OPS)}"
            )
        ins = [int(k) for k in (op.inputs if op.inputs is not None else [])]
        if len(out_idx) != 1 or not ins:
            raise self.fail(f"{layer}: needs inputs and exactly one output", "fix the model")
        opts = op.builtinOptions
        try:
            return self._op(kind, layer, ins, out_idx[0], opts)
        except ModelError as e:
            if str(e).startswith(self.path):
                raise
            raise self.fail(
                f"{layer}: {e}", "requantize the model following the TFLite int8 rules"
            ) from None

    def _op(self, kind: str, layer: str, ins: list[int], out: int, opts: Any) -> Op:
        reg = registry.get(kind)
        names = [
            self.tensor(k, layer, j < reg.activation_inputs and self._is_act(k))
            for j, k in enumerate(ins)
            if k >= 0
        ]
        y = self.tensor(out, layer, True)
        return reg.tflite_import(TfliteOp(self, layer, names, y, opts))

    def _is_act(self, idx: int) -> bool:
        t = self.sg.tensors[idx]
        return not (
            t.buffer
            and self.model.buffers[t.buffer].data is not None
            and len(self.model.buffers[t.buffer].data)
        )


class TfliteOp:
    """One .tflite operator as an op's ``tflite_import`` sees it: its tensors declared, the
    input ``x`` and output ``y`` with their per-tensor quantization, the raw options."""

    def __init__(self, reader: _Reader, layer: str, names: list[str], y: str, opts: Any) -> None:
        self.reader, self.layer, self.names, self.y, self.opts = reader, layer, names, y, opts
        self.tensors = reader.tensors
        self.x = names[0]
        self.in_s, self.in_zp = reader.qparams(self.x, layer)
        self.out_s, self.out_zp = reader.qparams(y, layer)
        self.xs = self.tensors[self.x].shape
        self.padding = {0: "SAME", 1: "VALID"}.get(int(getattr(opts, "padding", 0) or 0), "SAME")

    def fail(self, cause: str, fix: str) -> ModelError:
        return self.reader.fail(cause, fix)

    def qparams(self, name: str) -> tuple[float, int]:
        return self.reader.qparams(name, self.layer)

    def activation(self) -> str:
        return self.reader.activation(self.opts, self.layer)

    def filter_inputs(self) -> tuple[list[str], Tensor]:
        """(input, filter[, bias]) and the filter, which must be constant and quantized."""
        names = self.names[:3]
        w = self.tensors[names[1]]
        if w.data is None or w.qparams is None:
            raise self.fail(
                f"{self.layer}: weights '{w.name}' must be constant and quantized",
                "use a model with constant int8 weights",
            )
        return names, w


def import_tflite(data: bytes, path: str = "model.tflite") -> Graph:
    """An int8 .tflite flatbuffer as a validated Graph (the batch axis is dropped)."""
    tfl, _ = schema()
    data = bytes(data)
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ModelError(
            f"{path}: not a .tflite file (no TFL3 identifier)", "pass a TensorFlow Lite flatbuffer"
        )
    try:
        model = tfl.ModelT.InitFromPackedBuf(data, 0)
    except Exception as e:  # the generated parser raises anything on garbage
        raise ModelError(
            f"{path}: malformed .tflite file ({type(e).__name__})", "re-export the model"
        ) from None
    if not model.subgraphs or len(model.subgraphs) != 1:
        raise ModelError(
            f"{path}: {len(model.subgraphs or [])} subgraphs, expected 1",
            "export a single-subgraph model",
        )
    r = _Reader(tfl, model, path)
    sg = r.sg
    _refuse_unsupported(r, sg.operators or [])
    if sg.inputs is None or sg.outputs is None or len(sg.inputs) != 1 or len(sg.outputs) != 1:
        raise ModelError(
            f"{path}: the model must have one input and one output",
            "export a single-input, single-output model",
        )
    try:
        ops = [r.op(i, op) for i, op in enumerate(sg.operators or [])]
        inp = r.tensor(int(sg.inputs[0]), "model input", True)
        out = r.tensor_name(int(sg.outputs[0]))
    except (IndexError, AttributeError, TypeError) as e:
        raise ModelError(
            f"{path}: malformed .tflite file ({type(e).__name__}: {e})", "re-export the model"
        ) from None
    used = {n for op in ops for n in op.inputs + op.outputs} | {inp}
    tensors = {n: t for n, t in r.tensors.items() if n in used}
    name = sg.name.decode() if isinstance(sg.name, bytes) else (sg.name or "model")
    g = Graph(tensors, ops, inp, out, name)
    try:
        g.validate()
    except ModelError as e:
        raise ModelError(f"{path}: {e.cause}", e.fix) from None
    return g


def _refuse_unsupported(r: _Reader, operators: list[Any]) -> None:
    """Every op hilbench does not run, named with its position and output, before any op is
    read: a model is imported whole or not at all."""
    bad = []
    try:
        for i, op in enumerate(operators):
            kind = r.opname(op)
            if kind not in SUPPORTED_OPS:
                out = list(op.outputs if op.outputs is not None else [])
                bad.append(f"layer {i} ({kind} -> '{r.tensor_name(out[0]) if out else '?'}')")
    except (IndexError, TypeError) as e:
        raise r.fail(
            f"malformed .tflite file ({type(e).__name__})", "re-export the model"
        ) from None
    if len(bad) == 1:
        cause = f"{bad[0]}: unsupported op {bad[0].split()[2][1:]}"
    else:
        cause = f"{len(bad)} unsupported ops of {len(operators)}: {', '.join(bad)}"
    if bad:
        raise r.fail(cause, f"use only {', '.join(SUPPORTED_OPS)}")


def load_tflite(path: str | Path) -> Graph:
    """Read and import a .tflite file; a missing file is a ModelError."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ModelError(f"cannot read {p}: {e.strerror}", "check the path") from None
    return import_tflite(data, str(p))
