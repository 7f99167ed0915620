"""Model zoo: small int8 models built from float weights with TFLite-style quantization."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu import convert, nets
from hilbench.npu.floatnet import FloatModel
from hilbench.npu.graph import Graph, Op, QParams, Tensor
from hilbench.npu.ops import fully_connected as fc
from hilbench.npu.quant import INT32_MAX, INT32_MIN, round_half_away

HIDDEN_HEADROOM = 1.5
N_CALIBRATION = 256

FloatLayers = list[tuple[np.ndarray, np.ndarray]]


def _asym_qparams(lo: float, hi: float) -> tuple[float, int]:
    """Asymmetric int8 (scale, zero point) covering [lo, hi] with 0 included."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi - lo <= 0.0:
        hi = 1.0
    scale = float(np.float32((hi - lo) / 255.0))
    zp = int(np.clip(round_half_away(-128.0 - lo / scale), -128, 127))
    return scale, zp


def quantize_weights_per_channel(
    w: np.ndarray, weight_range: int = 127
) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8 weights ``[out, in]``: scale = max|row| / ``weight_range``
    (float32; 127 uses the whole int8 range, less leaves the weights room to grow). All-zero
    rows borrow the largest row scale (1.0 if the whole matrix is zero)."""
    if not 1 <= weight_range <= 127:
        raise ModelError(f"weight_range {weight_range} invalid", "use 1..127 (127: full range)")
    w = np.asarray(w, dtype=np.float32)
    amax = np.abs(w).max(axis=1)
    scale = (amax / np.float32(weight_range)).astype(np.float32)
    fallback = scale.max() if np.any(scale > 0) else np.float32(1.0)
    scale = np.where(scale > 0, scale, fallback).astype(np.float32)
    q = round_half_away(w / scale[:, None])
    return np.clip(q, -127, 127).astype(np.int8), scale


def quantize_bias(
    b: np.ndarray, input_scale: float, weight_scales: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """int32 bias = round(b / (input_scale * weight_scale)); returns (data, float32 scales)."""
    bscale = (np.float32(input_scale) * np.asarray(weight_scales, dtype=np.float32)).astype(
        np.float32
    )
    q = round_half_away(np.asarray(b, dtype=np.float64) / bscale.astype(np.float64))
    return np.clip(q, INT32_MIN, INT32_MAX).astype(np.int32), bscale


def he_normal_mlp(sizes: Sequence[int], rng: np.random.Generator) -> FloatLayers:
    """He-normal float weights ``[out, in]`` and zero biases for an MLP."""
    layers: FloatLayers = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        w = rng.normal(0.0, np.sqrt(2.0 / fan_in), size=(fan_out, fan_in)).astype(np.float32)
        layers.append((w, np.zeros(fan_out, dtype=np.float32)))
    return layers


def float_forward(layers: FloatLayers, x: np.ndarray, dtype: type = np.float32) -> list[np.ndarray]:
    """Float MLP forward (RELU between layers) in ``dtype``; every layer's output, logits last."""
    outs = []
    h = np.asarray(x, dtype=dtype)
    for i, (w, b) in enumerate(layers):
        h = h @ np.asarray(w, dtype=dtype).T + np.asarray(b, dtype=dtype)
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
        outs.append(h)
    return outs


def build_mlp(
    sizes: Sequence[int] = (64, 32, 10),
    *,
    seed: int,
    calibration: np.ndarray | None = None,
    float_weights: FloatLayers | None = None,
    input_scale: float = 1 / 255,
    input_zero_point: int = -128,
    logit_range: float = 8.0,
    weight_range: int = 127,
) -> Graph:
    """An int8 MLP ``sizes[0] -> ... -> sizes[-1]``: FC+RELU hidden layers, FC logits.

    Float weights are He-normal from ``default_rng(seed)`` unless ``float_weights`` is given.
    Hidden activation ranges come from a float pass over ``calibration`` (default: 256
    uniform [0, 1) inputs drawn from the same generator after the weights) widened by
    ``HIDDEN_HEADROOM``; the logits use scale ``logit_range / 127`` with zero point 0.
    Each weight row's largest magnitude becomes ``weight_range`` LSBs (127: the whole int8
    range; a random init to be trained from scratch uses less, so its weights can grow).
    """
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) < 2 or any(s <= 0 for s in sizes):
        raise ModelError(f"MLP sizes {sizes} invalid", "give at least two positive sizes")
    if not logit_range > 0:
        raise ModelError(f"logit_range {logit_range} must be > 0", "use e.g. 8.0")
    rng = np.random.default_rng(seed)
    if float_weights is None:
        layers = he_normal_mlp(sizes, rng)
    else:
        layers = [(np.asarray(w, np.float32), np.asarray(b, np.float32)) for w, b in float_weights]
        shapes = [(w.shape, b.shape) for w, b in layers]
        want = [((o, i), (o,)) for i, o in itertools.pairwise(sizes)]
        if shapes != want:
            raise ModelError(
                f"float_weights shapes {shapes} do not fit sizes {sizes}",
                f"pass (W [out, in], b [out]) pairs shaped {want}",
            )
    if calibration is None:
        calibration = rng.random((N_CALIBRATION, sizes[0]), dtype=np.float32)
    calibration = np.asarray(calibration, dtype=np.float32)
    if calibration.ndim != 2 or calibration.shape[1] != sizes[0] or not len(calibration):
        raise ModelError(
            f"calibration shape {calibration.shape} invalid",
            f"pass float32 inputs of shape (N, {sizes[0]})",
        )
    # float64 ranges: the same on every CPU (see hilbench.npu.convert.quantize_model)
    acts = float_forward(layers, calibration, np.float64)

    tensors: dict[str, Tensor] = {}
    ops: list[Op] = []
    in_scale, in_zp = float(np.float32(input_scale)), int(input_zero_point)
    tensors["input"] = Tensor("input", (sizes[0],), "int8", QParams([in_scale], [in_zp]))
    prev = "input"
    n_layers = len(layers)
    for i, ((w, b), a) in enumerate(zip(layers, acts, strict=True)):
        last = i == n_layers - 1
        wq, wscale = quantize_weights_per_channel(w, weight_range)
        bq, bscale = quantize_bias(b, in_scale, wscale)
        if last:
            out_scale, out_zp = float(np.float32(logit_range / 127.0)), 0
            act, out_name = "NONE", "logits"
        else:
            lo, hi = float(a.min()), float(a.max())
            out_scale, out_zp = _asym_qparams(lo * HIDDEN_HEADROOM, hi * HIDDEN_HEADROOM)
            act, out_name = "RELU", f"fc{i}_out"
        wn, bn = f"fc{i}_w", f"fc{i}_b"
        tensors[wn] = Tensor(
            wn, wq.shape, "int8", QParams(wscale, np.zeros(wscale.size, np.int32), 0), wq
        )
        tensors[bn] = Tensor(
            bn, bq.shape, "int32", QParams(bscale, np.zeros(bscale.size, np.int32), 0), bq
        )
        tensors[out_name] = Tensor(out_name, (w.shape[0],), "int8", QParams([out_scale], [out_zp]))
        params = fc.prepare(in_scale, in_zp, wscale, out_scale, out_zp, act)
        ops.append(Op(fc.KIND, [prev, wn, bn], [out_name], params))
        prev, in_scale, in_zp = out_name, out_scale, out_zp
    g = Graph(tensors, ops, "input", prev, "mlp")
    g.validate()
    return g


def _from_float(
    model: FloatModel,
    rng: np.random.Generator,
    calibration: np.ndarray | None,
    float_weights: FloatLayers | None,
    quant_kw: dict,
) -> Graph:
    if float_weights is not None:
        model.set_weights(list(float_weights))
    calib = convert.calibration_input(model, calibration, rng, N_CALIBRATION)
    return convert.quantize_model(model, calib, **quant_kw)


def build_cnn(
    *,
    seed: int,
    calibration: np.ndarray | None = None,
    float_weights: FloatLayers | None = None,
    channels: tuple[int, int] = (8, 16),
    classes: int = 10,
    resolution: int = 8,
    input_scale: float = 1 / 255,
    input_zero_point: int = -128,
    logit_range: float = 8.0,
) -> Graph:
    """The small digits CNN (see :func:`hilbench.npu.nets.cnn`) on (8, 8, 1) inputs in
    [0, 1]. ``calibration`` may be (N, 64), (N, 8, 8) or (N, 8, 8, 1) floats; default 256
    uniform inputs drawn after the weights. Quantized like :func:`build_mlp`."""
    rng = np.random.default_rng(seed)
    model = nets.cnn(rng, tuple(channels), classes, resolution)
    return _from_float(
        model,
        rng,
        calibration,
        float_weights,
        {
            "input_scale": input_scale,
            "input_zero_point": input_zero_point,
            "logit_range": logit_range,
        },
    )


def build_mobilenet_v2(
    *,
    seed: int,
    calibration: np.ndarray | None = None,
    float_weights: FloatLayers | None = None,
    alpha: float = 0.35,
    resolution: int = 96,
    classes: int = 10,
    logit_range: float | None = None,
) -> Graph:
    """MobileNetV2 (alpha, resolution, classes) on (R, R, 3) inputs in [0, 1]; random
    He-normal float weights unless ``float_weights`` is given. The logits are calibrated
    (``logit_range=None``) unless a fixed range is given."""
    rng = np.random.default_rng(seed)
    model = nets.mobilenet_v2(rng, alpha, resolution, classes)
    return _from_float(model, rng, calibration, float_weights, {"logit_range": logit_range})


def build_resnet18(
    *,
    seed: int,
    calibration: np.ndarray | None = None,
    float_weights: FloatLayers | None = None,
    width: float = 0.25,
    resolution: int = 64,
    classes: int = 10,
    logit_range: float | None = None,
) -> Graph:
    """ResNet18 (width, resolution, classes) on (R, R, 3) inputs in [0, 1]; random
    He-normal float weights unless ``float_weights`` is given. The logits are calibrated
    (``logit_range=None``) unless a fixed range is given."""
    rng = np.random.default_rng(seed)
    model = nets.resnet18(rng, width, resolution, classes)
    return _from_float(model, rng, calibration, float_weights, {"logit_range": logit_range})


MODELS: dict[str, Callable[..., Graph]] = {
    "mlp": build_mlp,
    "cnn": build_cnn,
    "mobilenet_v2": build_mobilenet_v2,
    "resnet18": build_resnet18,
}


def build(
    name: str,
    *,
    seed: int,
    calibration: np.ndarray | None = None,
    float_weights: FloatLayers | None = None,
    **kw: object,
) -> Graph:
    """Build zoo model ``name`` from float weights (seeded random init unless
    ``float_weights``, e.g. from :mod:`hilbench.npu.pretrain`) quantized with ``calibration``
    (float inputs in [0, 1]). Unknown names raise ModelError listing the known ones."""
    try:
        builder = MODELS[name]
    except KeyError:
        raise ModelError(
            f"unknown model {name!r}", f"use one of: {', '.join(sorted(MODELS))}"
        ) from None
    return builder(seed=seed, calibration=calibration, float_weights=float_weights, **kw)
