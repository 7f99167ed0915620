"""Post-training int8 quantization of a :class:`FloatModel` into a :class:`Graph`.

TFLite's scheme: per-channel symmetric int8 weights (scale = max|w| / 127 per output channel),
int32 biases of scale input_scale * weight_scale, asymmetric per-tensor int8 activations whose
ranges come from a float pass over calibration data widened by ``headroom`` (RELU outputs start
at 0, RELU6 outputs stop at 6), pools and reshapes keep their input's quantization, and the
logits use the fixed scale ``logit_range / 127`` with zero point 0.
"""

from __future__ import annotations

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu.floatnet import FloatModel, Layer
from hilbench.npu.graph import Graph, Op, QParams, Tensor
from hilbench.npu.ops import (
    add,
    average_pool2d,
    conv2d,
    depthwise_conv2d,
    max_pool2d,
    mean,
    reshape,
)
from hilbench.npu.ops import fully_connected as fc
from hilbench.npu.quant import INT32_MAX, INT32_MIN, round_half_away

HEADROOM = 1.5


def asym_qparams(lo: float, hi: float) -> tuple[float, int]:
    """Asymmetric int8 (scale, zero point) covering [lo, hi] with 0 included."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi - lo <= 0.0:
        hi = 1.0
    scale = float(np.float32((hi - lo) / 255.0))
    zp = int(np.clip(round_half_away(-128.0 - lo / scale), -128, 127))
    return scale, zp


def quantize_filter(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-channel int8 along ``axis``: scale = max|w| / 127 (float32); all-zero
    channels borrow the largest scale (1.0 if everything is zero)."""
    w = np.asarray(w, dtype=np.float32)
    other = tuple(i for i in range(w.ndim) if i != axis)
    scale = (np.abs(w).max(axis=other) / np.float32(127.0)).astype(np.float32)
    fallback = scale.max() if np.any(scale > 0) else np.float32(1.0)
    scale = np.where(scale > 0, scale, fallback).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = round_half_away(w / scale.reshape(shape))
    return np.clip(q, -127, 127).astype(np.int8), scale


def quantize_bias(
    b: np.ndarray, input_scale: float, weight_scales: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """int32 bias = round(b / (input_scale * weight_scale)); returns (data, float32 scales)."""
    bscale = (np.float32(input_scale) * np.asarray(weight_scales, np.float32)).astype(np.float32)
    q = round_half_away(np.asarray(b, np.float64) / bscale.astype(np.float64))
    return np.clip(q, INT32_MIN, INT32_MAX).astype(np.int32), bscale


def calibration_input(
    model: FloatModel,
    calibration: np.ndarray | None,
    rng: np.random.Generator,
    n_default: int = 256,
) -> np.ndarray:
    """Calibration inputs shaped (N, *input_shape); default uniform [0, 1) from ``rng``."""
    if calibration is None:
        return rng.random((n_default, *model.input_shape), dtype=np.float32)
    a = np.asarray(calibration, dtype=np.float32)
    per = int(np.prod(model.input_shape))
    if a.ndim < 2 or not len(a) or int(np.prod(a.shape[1:])) != per:
        dims = ", ".join(map(str, model.input_shape))
        raise ModelError(
            f"calibration shape {a.shape} invalid for model {model.name}",
            f"pass float32 inputs of shape (N, {dims}) or (N, {per})",
        )
    return a.reshape(len(a), *model.input_shape)


class _Builder:
    def __init__(
        self,
        model: FloatModel,
        env: dict[str, np.ndarray],
        headroom: float,
        logit_range: float | None,
    ) -> None:
        self.model, self.env = model, env
        self.headroom, self.logit_range = headroom, logit_range
        self.tensors: dict[str, Tensor] = {}
        self.ops: list[Op] = []

    def q(self, name: str) -> tuple[float, int]:
        qp = self.tensors[name].qparams
        return float(qp.scale[0]), int(qp.zero_point[0])

    def activation(self, name: str, shape: tuple[int, ...], qp: tuple[float, int]) -> None:
        self.tensors[name] = Tensor(name, shape, "int8", QParams([qp[0]], [qp[1]]))

    def out_qparams(self, ly: Layer) -> tuple[float, int]:
        if ly.output == "logits" and self.logit_range is not None:
            return float(np.float32(self.logit_range / 127.0)), 0
        a = self.env[ly.output]
        lo, hi = float(a.min()) * self.headroom, float(a.max()) * self.headroom
        if ly.act in ("RELU", "RELU6"):
            lo = 0.0
        if ly.act == "RELU6":
            hi = min(hi, 6.0)
        return asym_qparams(lo, hi)

    def constant(self, name: str, data: np.ndarray, scales: np.ndarray, axis: int) -> None:
        qp = QParams(scales, np.zeros(scales.size, np.int32), axis if scales.size > 1 else None)
        self.tensors[name] = Tensor(name, data.shape, str(data.dtype), qp, data)

    def weights(self, ly: Layer, axis: int) -> tuple[list[str], np.ndarray]:
        in_s, _ = self.q(ly.inputs[0])
        wq, ws = quantize_filter(ly.w, axis)
        bq, bs = quantize_bias(ly.b, in_s, ws)
        wn, bn = f"{ly.name}_w", f"{ly.name}_b"
        self.constant(wn, wq, ws, axis)
        self.constant(bn, bq, bs, 0)
        return [ly.inputs[0], wn, bn], ws

    def layer(self, ly: Layer) -> None:
        x = ly.inputs[0]
        xs = self.tensors[x].shape
        in_s, in_zp = self.q(x)
        shape = tuple(self.env[ly.output].shape[1:])
        k = (ly.kernel, ly.kernel)
        geo = {"stride": (ly.stride, ly.stride), "padding": ly.padding}
        keeps = ly.kind in ("avgpool", "maxpool", "flatten")
        oq = (in_s, in_zp) if keeps else self.out_qparams(ly)
        if ly.kind == "conv":
            inputs, ws = self.weights(ly, 0)
            p = conv2d.prepare(
                in_s,
                in_zp,
                ws,
                *oq,
                ly.act,
                in_hw=xs[:2],
                k_hw=k,
                dilation=(ly.dilation, ly.dilation),
                **geo,
            )
            kind = conv2d.KIND
        elif ly.kind == "dwconv":
            inputs, ws = self.weights(ly, 3)
            p = depthwise_conv2d.prepare(
                in_s,
                in_zp,
                ws,
                *oq,
                ly.act,
                in_hw=xs[:2],
                k_hw=k,
                depth_multiplier=ly.multiplier,
                dilation=(ly.dilation, ly.dilation),
                **geo,
            )
            kind = depthwise_conv2d.KIND
        elif ly.kind == "fc":
            inputs, ws = self.weights(ly, 0)
            p, kind = fc.prepare(in_s, in_zp, ws, *oq, ly.act), fc.KIND
        elif ly.kind in ("avgpool", "maxpool"):
            mod = average_pool2d if ly.kind == "avgpool" else max_pool2d
            p = mod.prepare(in_s, in_zp, ly.act, in_hw=xs[:2], filter_hw=k, **geo)
            inputs, kind = [x], mod.KIND
        elif ly.kind == "mean":
            p = mean.prepare(in_s, in_zp, *oq, in_hw=xs[:2])
            inputs, kind = [x], mean.KIND
        elif ly.kind == "add":
            p = add.prepare(in_s, in_zp, *self.q(ly.inputs[1]), *oq, ly.act)
            inputs, kind = list(ly.inputs), add.KIND
        elif ly.kind == "flatten":
            p, inputs, kind = {}, [x], reshape.KIND
        else:
            raise ModelError(
                f"layer {ly.name}: kind {ly.kind!r} cannot be quantized",
                "use conv, dwconv, fc, avgpool, maxpool, mean, add or flatten",
            )
        self.activation(ly.output, shape, oq)
        self.ops.append(Op(kind, inputs, [ly.output], p))


def quantize_model(
    model: FloatModel,
    calibration: np.ndarray,
    *,
    input_scale: float = 1 / 255,
    input_zero_point: int = -128,
    logit_range: float | None = 8.0,
    headroom: float = HEADROOM,
) -> Graph:
    """The int8 graph of ``model``, activation ranges from ``calibration`` (N, *input).
    ``logit_range=None`` calibrates the logits like any other tensor."""
    if logit_range is not None and not logit_range > 0:
        raise ModelError(f"logit_range {logit_range} must be > 0", "use e.g. 8.0")
    if model.layers[-1].output != "logits":
        raise ModelError(
            f"model {model.name}: last layer must write 'logits'",
            "name the last layer's output 'logits'",
        )
    # Ranges from a float64 forward pass: float32 BLAS sums in a CPU-dependent order (OpenBLAS's
    # SkylakeX and Haswell kernels differ in the last bits), which moved a scale by one float32
    # step between CPUs; float64 errors (~1e-16) survive the float32 scale only with a
    # probability of about 1e-9 per tensor, so a model is quantized alike on every CPU.
    env = model.forward(calibration, np.float64)
    b = _Builder(model, env, headroom, logit_range)
    b.activation(
        "input", tuple(model.input_shape), (float(np.float32(input_scale)), int(input_zero_point))
    )
    for ly in model.layers:
        b.layer(ly)
    g = Graph(b.tensors, b.ops, "input", "logits", model.name)
    g.validate()
    return g
