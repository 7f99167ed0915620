"""Build single-op and whole-graph int8 .tflite models with tflite-micro's model_editor and run
them with the TFLM Python interpreter (reference kernels): the bit-exactness oracle."""

from __future__ import annotations

import numpy as np
import pytest

me = pytest.importorskip("tflite_micro.tensorflow.lite.micro.compression.model_editor")
tfl = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated")
runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

from hilbench.npu.graph import Graph, QParams  # noqa: E402

_TYPES = {"int8": tfl.TensorType.INT8, "int32": tfl.TensorType.INT32}
_ACT = {
    "NONE": tfl.ActivationFunctionType.NONE,
    "RELU": tfl.ActivationFunctionType.RELU,
    "RELU6": tfl.ActivationFunctionType.RELU6,
}


def _quant(q: QParams) -> object:
    scales = [float(s) for s in q.scale]
    zps = [int(z) for z in q.zero_point]
    if q.axis is None:
        return me.Quantization(scales[0], zps[0])
    return me.Quantization(scales, zps, axis=q.axis)


def _fc_options(activation: str) -> object:
    opt = tfl.FullyConnectedOptionsT()
    opt.fusedActivationFunction = _ACT[activation]
    opt.weightsFormat = tfl.FullyConnectedOptionsWeightsFormat.DEFAULT
    opt.keepNumDims = False
    return opt


def graph_to_tflite(graph: Graph, batch: int) -> bytes:
    """Export an FC-only graph as a .tflite flatbuffer with a fixed batch size."""
    model = me.Model(description=f"hilbench export of {graph.name}")
    sg = model.add_subgraph(name=graph.name)
    made = {}
    for name, t in graph.tensors.items():
        shape = t.shape if t.data is not None else (batch, *t.shape)
        kw = {"shape": shape, "dtype": _TYPES[t.dtype], "name": name}
        if t.qparams is not None:
            kw["quantization"] = _quant(t.qparams)
        if t.data is not None:
            kw["data"] = np.ascontiguousarray(t.data).astype(t.data.dtype.newbyteorder("<"))
        made[name] = sg.add_tensor(**kw)
    for op in graph.ops:
        if op.kind != "FULLY_CONNECTED":
            raise NotImplementedError(op.kind)
        o = sg.add_operator(opcode=tfl.BuiltinOperator.FULLY_CONNECTED,
                            inputs=[made[n] for n in op.inputs],
                            outputs=[made[n] for n in op.outputs])
        o._fb.builtinOptionsType = tfl.BuiltinOptions.FullyConnectedOptions
        o._fb.builtinOptions = _fc_options(op.params["activation"])
    sg.inputs = [made[graph.input]]
    sg.outputs = [made[graph.output]]
    return bytes(model.build())


def run_tflite(model: bytes, x: np.ndarray) -> np.ndarray:
    """Run a single-input, single-output model once on TFLM's reference kernels."""
    it = runtime.Interpreter.from_bytes(model, arena_size=max(65536, 16 * len(model)))
    it.set_input(x, 0)
    it.invoke()
    return np.asarray(it.get_output(0))
