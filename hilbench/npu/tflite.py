"""int8 ``.tflite`` in and out, through the flatbuffer schema and model editor that
``tflite-micro`` ships (no hand-written parser).

- :func:`export_tflite` writes a :class:`Graph` as a .tflite model with a fixed batch size.
- :func:`import_tflite` reads an int8 .tflite model into a validated :class:`Graph`; float or
  unsupported ops name the op and the layer, quantization that breaks TFLite's rules names the
  rule, and a malformed file says so — each a one-line :class:`ModelError`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu.graph import Graph, QParams

_INSTALL = "install the oracle package: pip install 'hilbench[dev]' (tflite-micro)"


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


def _options(tfl: ModuleType, kind: str, p: dict[str, Any]) -> tuple[int, Any] | None:
    """(BuiltinOptions type, options object) for one op."""
    act = getattr(tfl.ActivationFunctionType, p.get("activation", "NONE"))
    pad = getattr(tfl.Padding, p.get("padding", "VALID"))
    if kind == "FULLY_CONNECTED":
        o = tfl.FullyConnectedOptionsT()
        o.fusedActivationFunction = act
        o.weightsFormat = tfl.FullyConnectedOptionsWeightsFormat.DEFAULT
        o.keepNumDims = False
        return tfl.BuiltinOptions.FullyConnectedOptions, o
    if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        o = tfl.Conv2DOptionsT() if kind == "CONV_2D" else tfl.DepthwiseConv2DOptionsT()
        o.padding, o.fusedActivationFunction = pad, act
        o.strideH, o.strideW = p["stride_h"], p["stride_w"]
        o.dilationHFactor, o.dilationWFactor = p["dilation_h"], p["dilation_w"]
        if kind == "CONV_2D":
            return tfl.BuiltinOptions.Conv2DOptions, o
        o.depthMultiplier = p["depth_multiplier"]
        return tfl.BuiltinOptions.DepthwiseConv2DOptions, o
    if kind in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        o = tfl.Pool2DOptionsT()
        o.padding, o.fusedActivationFunction = pad, act
        o.strideH, o.strideW = p["stride_h"], p["stride_w"]
        o.filterHeight, o.filterWidth = p["filter_h"], p["filter_w"]
        return tfl.BuiltinOptions.Pool2DOptions, o
    if kind == "MEAN":
        o = tfl.ReducerOptionsT()
        o.keepDims = bool(p["keep_dims"])
        return tfl.BuiltinOptions.ReducerOptions, o
    if kind == "ADD":
        o = tfl.AddOptionsT()
        o.fusedActivationFunction = act
        return tfl.BuiltinOptions.AddOptions, o
    if kind == "RESHAPE":
        return tfl.BuiltinOptions.ReshapeOptions, tfl.ReshapeOptionsT()
    raise ModelError(f"op {kind} cannot be exported to .tflite", "use the ops of hilbench.npu")


def export_tflite_indexed(graph: Graph, batch: int = 1) -> tuple[bytes, dict[str, int]]:
    """The .tflite bytes of ``graph`` (batch ``batch``) and each graph tensor's index in the
    flatbuffer's subgraph (for per-layer comparison)."""
    tfl, me = schema()
    graph.validate()
    model = me.Model(description=f"hilbench export of {graph.name}")
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
        inputs = [made[n] for n in op.inputs]
        if op.kind == "MEAN":
            inputs.append(
                sg.add_tensor(
                    shape=(2,),
                    dtype=tfl.TensorType.INT32,
                    name=f"op{i}_axis",
                    data=np.array([1, 2], "<i4"),
                )
            )
        elif op.kind == "RESHAPE":
            out_shape = (batch, *graph.tensors[op.outputs[0]].shape)
            inputs.append(
                sg.add_tensor(
                    shape=(len(out_shape),),
                    dtype=tfl.TensorType.INT32,
                    name=f"op{i}_shape",
                    data=np.array(out_shape, "<i4"),
                )
            )
        o = sg.add_operator(
            opcode=getattr(tfl.BuiltinOperator, op.kind),
            inputs=inputs,
            outputs=[made[n] for n in op.outputs],
        )
        o._fb.builtinOptionsType, o._fb.builtinOptions = _options(tfl, op.kind, op.params)
        if op.kind == "RESHAPE":
            o._fb.builtinOptions.newShape = [batch, *graph.tensors[op.outputs[0]].shape]
    sg.inputs = [made[graph.input]]
    sg.outputs = [made[graph.output]]
    data = bytes(model.build())
    return data, {n: made[n].index for n in graph.tensors}


def export_tflite(graph: Graph, batch: int = 1) -> bytes:
    """The .tflite bytes of ``graph`` with a fixed batch size."""
    return export_tflite_indexed(graph, batch)[0]


def activation_name(code: int) -> str:
    names = {0: "NONE", 1: "RELU", 3: "RELU6"}
    if code not in names:
        raise KeyError(code)
    return names[code]
