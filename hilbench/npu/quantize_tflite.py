"""Float .tflite in, int8 graph out, by hilbench's own quantizer (:mod:`hilbench.npu.convert`:
per-channel symmetric int8 weights, int32 biases, per-tensor activations calibrated on data).

:func:`import_float_tflite` reads a float32 single-subgraph .tflite of the ops hilbench runs
(CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, AVERAGE_POOL_2D, MAX_POOL_2D, MEAN over H and W,
ADD, RESHAPE to a vector; fused NONE/RELU/RELU6) into a :class:`FloatModel`;
:func:`quantize_float_tflite` quantizes it with calibration inputs (the input's own scale and
zero point from their range). :func:`export_float_tflite` writes a FloatModel as a float
.tflite (tflite-micro's model editor, as :mod:`hilbench.npu.tflite` does for int8), so that
round trips can be tested. Filters are TFLite's layouts already: conv ``[O, KH, KW, I]``,
depthwise ``[1, KH, KW, C*M]``, FC ``[O, I]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu import convert
from hilbench.npu.floatnet import FloatModel, Layer
from hilbench.npu.graph import Graph
from hilbench.npu.tflite import schema

KINDS = {  # TFLite builtin -> float layer kind
    "CONV_2D": "conv",
    "DEPTHWISE_CONV_2D": "dwconv",
    "FULLY_CONNECTED": "fc",
    "AVERAGE_POOL_2D": "avgpool",
    "MAX_POOL_2D": "maxpool",
    "MEAN": "mean",
    "ADD": "add",
    "RESHAPE": "flatten",
}
ACTS = ("NONE", "RELU", "RELU6")


def _names(enum_cls: type) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_")}


# --- import ----------------------------------------------------------------------------------
def import_float_tflite(data: bytes, path: str = "model.tflite") -> FloatModel:
    """A float32 .tflite as a FloatModel; ModelError naming every op it cannot take."""
    tfl, _ = schema()
    data = bytes(data)
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ModelError(f"{path}: not a .tflite file (no TFL3 identifier)", "pass a .tflite")
    try:
        model = tfl.ModelT.InitFromPackedBuf(data, 0)
        sg = model.subgraphs[0]
    except Exception as e:  # the generated parser raises anything on garbage
        raise ModelError(
            f"{path}: malformed .tflite ({type(e).__name__})", "re-export it"
        ) from None
    ops_by_code, acts, types = (
        _names(tfl.BuiltinOperator),
        _names(tfl.ActivationFunctionType),
        _names(tfl.TensorType),
    )
    tensors = sg.tensors

    def tname(i: int) -> str:
        n = tensors[i].name
        return n.decode() if isinstance(n, bytes) else str(n)

    kinds = []
    for op in sg.operators or []:
        code = model.operatorCodes[op.opcodeIndex]
        kinds.append(ops_by_code.get(max(code.builtinCode, code.deprecatedBuiltinCode), "?"))
    bad = [f"layer {i} ({k})" for i, k in enumerate(kinds) if k not in KINDS]
    if bad:
        raise ModelError(
            f"{path}: {len(bad)} unsupported op{'s' if len(bad) > 1 else ''}: {', '.join(bad)}",
            f"use only {', '.join(KINDS)}",
        )
    notfloat = [
        tname(i) for i, t in enumerate(tensors) if types[t.type] not in ("FLOAT32", "INT32")
    ]
    if notfloat:
        raise ModelError(
            f"{path}: tensors {', '.join(notfloat[:4])} are not float32 (not a float model)",
            "pass an int8 model to `hilbench infer`, or a float32 one here",
        )
    if len(sg.inputs) != 1 or len(sg.outputs) != 1:
        raise ModelError(f"{path}: needs one input and one output", "export it so")
    rename = {int(sg.inputs[0]): "input", int(sg.outputs[0]): "logits"}

    def name(i: int) -> str:
        return rename.get(i, tname(i))

    def const(i: int) -> np.ndarray | None:
        buf = model.buffers[tensors[i].buffer].data
        if buf is None or len(buf) == 0:
            return None
        dtype = np.float32 if types[tensors[i].type] == "FLOAT32" else np.int32
        return np.frombuffer(bytes(buf), dtype=np.dtype(dtype).newbyteorder("<")).reshape(
            tuple(tensors[i].shape)
        )

    in_shape = tuple(int(d) for d in tensors[int(sg.inputs[0])].shape[1:])
    fm = FloatModel(name=_str(sg.name) or "float", input_shape=in_shape)
    for i, (kind, op) in enumerate(zip(kinds, sg.operators, strict=True)):
        layer = f"{path}: layer {i} ({kind})"
        o = op.builtinOptions
        ins = [int(k) for k in op.inputs if k >= 0]
        act = acts.get(getattr(o, "fusedActivationFunction", 0), "?")
        if act not in ACTS:
            raise ModelError(f"{layer}: fused activation {act}", f"use one of {', '.join(ACTS)}")
        ly = Layer(
            name=f"l{i}", kind=KINDS[kind], inputs=[name(ins[0])], output=name(op.outputs[0])
        )
        ly.act = act
        if kind in ("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D"):
            if o.strideH != o.strideW:
                raise ModelError(f"{layer}: strides {o.strideH}x{o.strideW}", "use square ones")
            ly.stride = int(o.strideW)
            ly.padding = "SAME" if o.padding == tfl.Padding.SAME else "VALID"
        if kind in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            stem, slash, _ = tname(ins[1]).rpartition("/")
            ly.name = stem if slash else ly.name  # hilbench's own exports: NAME/w
            ly.w, ly.b = const(ins[1]), const(ins[2]) if len(ins) > 2 else None
            if ly.w is None:
                raise ModelError(f"{layer}: the filter is not a constant", "freeze the model")
            ly.w = np.array(ly.w, np.float32)
            outs = ly.w.shape[-1] if kind == "DEPTHWISE_CONV_2D" else ly.w.shape[0]
            ly.b = np.zeros(outs, np.float32) if ly.b is None else np.array(ly.b, np.float32)
            if kind != "FULLY_CONNECTED":
                kh, kw = ly.w.shape[1:3]
                if kh != kw or o.dilationHFactor != o.dilationWFactor:
                    raise ModelError(f"{layer}: a {kh}x{kw} window", "use square windows")
                ly.kernel, ly.dilation = int(kh), int(o.dilationWFactor)
            if kind == "DEPTHWISE_CONV_2D":
                ly.multiplier = int(o.depthMultiplier or 1)
        elif kind in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
            if o.filterHeight != o.filterWidth:
                raise ModelError(f"{layer}: a non-square window", "use square windows")
            ly.kernel = int(o.filterWidth)
        elif kind == "ADD":
            ly.inputs = [name(ins[0]), name(ins[1])]
        elif kind == "MEAN":
            axes = const(ins[1])
            if axes is None or sorted(int(a) for a in axes.ravel()) != [1, 2] or o.keepDims:
                raise ModelError(f"{layer}: MEAN must reduce H and W", "reduce axes (1, 2)")
        elif kind == "RESHAPE" and len(tensors[op.outputs[0]].shape) != 2:
            raise ModelError(f"{layer}: reshapes to rank 3+", "reshape to (batch, N) only")
        fm.layers.append(ly)
    if not fm.layers or fm.layers[-1].output != "logits":
        raise ModelError(f"{path}: the last op must write the output", "order the ops")
    return fm


def _str(s: Any) -> str:
    return s.decode() if isinstance(s, bytes) else (s or "")


def quantize_float_tflite(
    data: bytes, calibration: np.ndarray, path: str = "model.tflite"
) -> Graph:
    """The int8 graph of a float .tflite, its activation ranges (and the input's scale and zero
    point) from ``calibration`` (N, *input) float inputs; the logits calibrated like any
    tensor."""
    fm = import_float_tflite(data, path)
    calib = convert.calibration_input(fm, calibration, np.random.default_rng(0))
    scale, zero = convert.asym_qparams(float(calib.min()), float(calib.max()))
    return convert.quantize_model(
        fm, calib, input_scale=scale, input_zero_point=zero, logit_range=None
    )


# --- export ------------------------------------------------------------------------------------
def export_float_tflite(fm: FloatModel) -> bytes:
    """``fm`` as a float32 .tflite (batch 1)."""
    tfl, me = schema()
    act = {a: getattr(tfl.ActivationFunctionType, a) for a in ACTS}
    model = me.Model(description=f"hilbench float export of {fm.name}")
    sg = model.add_subgraph(name=fm.name)
    shapes = {k: v.shape[1:] for k, v in fm.forward(np.zeros((1, *fm.input_shape))).items()}
    made: dict[str, Any] = {}

    def tensor(name: str) -> Any:
        if name not in made:
            made[name] = sg.add_tensor(
                shape=(1, *shapes[name]), dtype=tfl.TensorType.FLOAT32, name=name
            )
        return made[name]

    def const(name: str, value: np.ndarray, dtype: int = tfl.TensorType.FLOAT32) -> Any:
        np_dtype = "<f4" if dtype == tfl.TensorType.FLOAT32 else "<i4"
        return sg.add_tensor(shape=value.shape, dtype=dtype, name=name, data=value.astype(np_dtype))

    builtin = {v: k for k, v in KINDS.items()}
    for ly in fm.layers:
        kind = builtin[ly.kind]
        ins = [tensor(n) for n in ly.inputs]
        if ly.kind in ("conv", "dwconv", "fc"):
            ins += [const(f"{ly.name}/w", ly.w), const(f"{ly.name}/b", ly.b)]
        pad = tfl.Padding.SAME if ly.padding == "SAME" else tfl.Padding.VALID
        if ly.kind == "conv":
            o = tfl.Conv2DOptionsT()
        elif ly.kind == "dwconv":
            o = tfl.DepthwiseConv2DOptionsT()
            o.depthMultiplier = ly.multiplier
        elif ly.kind in ("avgpool", "maxpool"):
            o = tfl.Pool2DOptionsT()
            o.filterHeight = o.filterWidth = ly.kernel
        elif ly.kind == "fc":
            o = tfl.FullyConnectedOptionsT()
        elif ly.kind == "add":
            o = tfl.AddOptionsT()
        elif ly.kind == "mean":
            o = tfl.ReducerOptionsT()
            o.keepDims = False
            ins.append(const(f"{ly.name}/axes", np.array([1, 2]), tfl.TensorType.INT32))
        else:
            o = tfl.ReshapeOptionsT()
            o.newShape = [1, int(np.prod(shapes[ly.output]))]
            ins.append(const(f"{ly.name}/shape", np.array(o.newShape), tfl.TensorType.INT32))
        if ly.kind in ("conv", "dwconv", "avgpool", "maxpool"):
            o.padding, o.strideH, o.strideW = pad, ly.stride, ly.stride
        if ly.kind in ("conv", "dwconv"):
            o.dilationHFactor = o.dilationWFactor = ly.dilation
        if hasattr(o, "fusedActivationFunction"):
            o.fusedActivationFunction = act[ly.act]
        op = sg.add_operator(
            opcode=getattr(tfl.BuiltinOperator, kind), inputs=ins, outputs=[tensor(ly.output)]
        )
        op._fb.builtinOptionsType = getattr(tfl.BuiltinOptions, type(o).__name__[:-1])
        op._fb.builtinOptions = o
    sg.inputs, sg.outputs = [made["input"]], [made["logits"]]
    return bytes(model.build())
