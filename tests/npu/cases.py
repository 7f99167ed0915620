"""Random single-op int8 graphs that follow TFLite's quantization rules, for the oracle.

Each generator draws shapes, strides, paddings, dilations, depth multipliers, activations,
scales and zero points, and picks the output scale from the op's real accumulator range
(computed by the slow references in refimpl.py) so outputs use the int8 range instead of
saturating. Returns ``(graph, x)`` with x (N, *input_shape) int8.
"""

from __future__ import annotations

import numpy as np

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
from hilbench.npu.quant import ACTIVATIONS

from .refimpl import conv_acc, depthwise_acc


def _f32(v: float) -> float:
    return float(np.float32(v))


def _act_tensor(name: str, shape: tuple[int, ...], s: float, zp: int) -> Tensor:
    return Tensor(name, shape, "int8", QParams([_f32(s)], [int(zp)]))


def _input(rng: np.random.Generator, n: int, shape: tuple[int, ...], zp: int) -> np.ndarray:
    if rng.random() < 0.5:
        return rng.integers(-128, 128, (n, *shape)).astype(np.int8)
    return np.clip(np.round(rng.normal(zp, 20, (n, *shape))), -128, 127).astype(np.int8)


def _weights(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    style = rng.integers(0, 4)
    if style == 0:
        w = rng.integers(-127, 128, shape)
    elif style == 1:
        w = np.clip(np.round(rng.normal(0, 20, shape)), -127, 127)
    elif style == 2:
        w = rng.integers(-127, 128, shape) * (rng.random(shape) < 0.2)
    else:
        w = rng.choice([-127, 127], shape)
    return w.astype(np.int8)


def _out_quant(
    rng, act: str, real_max: float, in_s: float, w_scales: np.ndarray
) -> tuple[float, int, np.ndarray]:
    """(out_scale, out_zp, possibly rescaled w_scales) giving a well-used output range."""
    if rng.random() < 0.1:  # multiplier > 1: a left shift
        out_s = in_s * float(w_scales.max()) / rng.uniform(1.0, 8.0)
    elif act == "RELU6":
        w_scales = (w_scales * (rng.uniform(4, 15) / real_max)).astype(np.float32)
        out_s = rng.uniform(6 / 250, 6 / 60)
    else:
        out_s = real_max / rng.uniform(60, 250)
    out_zp = int(rng.integers(-128, 128)) if rng.random() < 0.3 else int(rng.integers(-20, 21))
    if act != "NONE" and rng.random() < 0.7:
        out_zp = int(rng.integers(-128, -100))
    return _f32(out_s), out_zp, w_scales


def _filter_graph(
    kind: str, rng, x_shape, w, n_out, axis, prepare_kw, n
) -> tuple[Graph, np.ndarray]:
    """Shared by CONV_2D and DEPTHWISE_CONV_2D."""
    in_s = _f32(10 ** rng.uniform(-3, 0))
    in_zp = int(rng.integers(-128, 128))
    x = _input(rng, n, x_shape, in_zp)
    per_channel = rng.random() < 0.7 and n_out > 1
    w_scales = (10 ** rng.uniform(-4, -1, n_out if per_channel else 1)).astype(np.float32)
    p0 = {
        **prepare_kw,
        **(
            conv2d.prepare(
                1.0,
                0,
                [1.0],
                1.0,
                0,
                "NONE",
                **{k: v for k, v in prepare_kw.items() if k != "depth_multiplier"},
            )
        ),
    }
    ref = conv_acc if kind == conv2d.KIND else depthwise_acc
    acc = ref(x, w, None, in_zp, p0)
    spread = float(np.std(acc)) + float(np.abs(acc).mean()) + 1.0
    bias = None
    if rng.random() < 0.75:
        lim = spread * (3 if rng.random() < 0.8 else 300)
        bias = rng.integers(-int(lim), int(lim) + 1, n_out).astype(np.int32)
        acc = acc + bias
    act = str(rng.choice(ACTIVATIONS))
    ws_full = np.broadcast_to(w_scales, (n_out,)).astype(np.float64)
    real_max = float(np.abs(acc * (in_s * ws_full)).max()) + 1e-6
    out_s, out_zp, w_scales = _out_quant(rng, act, real_max, in_s, w_scales)
    mod = conv2d if kind == conv2d.KIND else depthwise_conv2d
    p = mod.prepare(in_s, in_zp, w_scales, out_s, out_zp, act, **prepare_kw)
    zeros = np.zeros(w_scales.size, np.int32)
    q_axis = axis if w_scales.size > 1 else None
    t = {
        "x": _act_tensor("x", x_shape, in_s, in_zp),
        "w": Tensor("w", w.shape, "int8", QParams(w_scales, zeros, q_axis), w),
        "y": _act_tensor("y", (p["out_h"], p["out_w"], n_out), out_s, out_zp),
    }
    inputs = ["x", "w"]
    if bias is not None:
        bscale = (np.float32(in_s) * w_scales).astype(np.float32)
        t["b"] = Tensor(
            "b", (n_out,), "int32", QParams(bscale, zeros, 0 if q_axis is not None else None), bias
        )
        inputs.append("b")
    g = Graph(t, [Op(kind, inputs, ["y"], p)], "x", "y", kind.lower())
    g.validate()
    return g, x


def _window(rng, k_max: int = 5) -> dict:
    """Random kernel, stride, dilation and padding, and an input big enough for VALID."""
    kh, kw = (int(v) for v in rng.integers(1, k_max + 1, 2))
    stride = tuple(int(v) for v in rng.integers(1, 4, 2))
    dil = tuple(int(v) for v in rng.integers(1, 4, 2)) if rng.random() < 0.3 else (1, 1)
    padding = "SAME" if rng.random() < 0.5 else "VALID"
    eff = ((kh - 1) * dil[0] + 1, (kw - 1) * dil[1] + 1)
    lo = eff if padding == "VALID" else (1, 1)
    h = int(rng.integers(lo[0], lo[0] + 12))
    w = int(rng.integers(lo[1], lo[1] + 12))
    return {
        "k_hw": (kh, kw),
        "stride": stride,
        "dilation": dil,
        "padding": padding,
        "in_hw": (h, w),
    }


def conv_case(rng: np.random.Generator) -> tuple[Graph, np.ndarray]:
    win = _window(rng)
    cin = int(rng.choice([1, 2, 3, 4, 8, 16, 70])) if rng.random() < 0.9 else 120
    o = int(rng.integers(1, 9))
    w = _weights(rng, (o, *win["k_hw"], cin))
    n = int(rng.integers(1, 4))
    return _filter_graph(conv2d.KIND, rng, (*win["in_hw"], cin), w, o, 0, win, n)


def depthwise_case(rng: np.random.Generator) -> tuple[Graph, np.ndarray]:
    win = _window(rng)
    cin = int(rng.integers(1, 9))
    m = int(rng.choice([1, 1, 2, 3]))
    w = _weights(rng, (1, *win["k_hw"], cin * m))
    n = int(rng.integers(1, 4))
    return _filter_graph(
        depthwise_conv2d.KIND,
        rng,
        (*win["in_hw"], cin),
        w,
        cin * m,
        3,
        {**win, "depth_multiplier": m},
        n,
    )


def pool_case(rng: np.random.Generator, kind: str) -> tuple[Graph, np.ndarray]:
    win = _window(rng, 4)
    cin = int(rng.integers(1, 9))
    s = _f32(10 ** rng.uniform(-3, 0))
    zp = int(rng.integers(-128, 128))
    act = str(rng.choice(ACTIVATIONS))
    if act == "RELU6":
        s = _f32(rng.uniform(6 / 250, 6 / 30))
    mod = average_pool2d if kind == "avg" else max_pool2d
    p = mod.prepare(
        s,
        zp,
        act,
        in_hw=win["in_hw"],
        filter_hw=win["k_hw"],
        stride=win["stride"],
        padding=win["padding"],
    )
    shape = (*win["in_hw"], cin)
    t = {
        "x": _act_tensor("x", shape, s, zp),
        "y": _act_tensor("y", (p["out_h"], p["out_w"], cin), s, zp),
    }
    g = Graph(t, [Op(mod.KIND, ["x"], ["y"], p)], "x", "y", mod.KIND.lower())
    g.validate()
    return g, _input(rng, int(rng.integers(1, 4)), shape, zp)


def mean_case(rng: np.random.Generator) -> tuple[Graph, np.ndarray]:
    h, w, cin = int(rng.integers(1, 13)), int(rng.integers(1, 13)), int(rng.integers(1, 17))
    in_s = _f32(10 ** rng.uniform(-3, 0))
    in_zp = int(rng.integers(-128, 128))
    if rng.random() < 0.2:
        out_s, out_zp = in_s, in_zp
    else:
        out_s = _f32(in_s * 10 ** rng.uniform(-1, 0.7))
        out_zp = int(rng.integers(-128, 128))
    keep = bool(rng.random() < 0.5)
    p = mean.prepare(in_s, in_zp, out_s, out_zp, in_hw=(h, w), keep_dims=keep)
    t = {
        "x": _act_tensor("x", (h, w, cin), in_s, in_zp),
        "y": _act_tensor("y", (1, 1, cin) if keep else (cin,), out_s, out_zp),
    }
    g = Graph(t, [Op(mean.KIND, ["x"], ["y"], p)], "x", "y", "mean")
    g.validate()
    return g, _input(rng, int(rng.integers(1, 4)), (h, w, cin), in_zp)


def add_case(rng: np.random.Generator) -> tuple[Graph, np.ndarray]:
    """ADD of the input and the input requantized to other (scale, zero point) by an identity
    1x1 CONV_2D, so both operands are activations with different quantization."""
    h, w, cin = (int(v) for v in rng.integers(1, 9, 3))
    shape = (h, w, cin)
    s1 = _f32(10 ** rng.uniform(-3, 0))
    zp1 = int(rng.integers(-128, 128))
    s2 = _f32(s1 * 10 ** rng.uniform(-1.5, 1.5))
    zp2 = int(rng.integers(-128, 128))
    act = str(rng.choice(ACTIVATIONS))
    out_s = _f32(max(s1, s2) * 10 ** rng.uniform(-0.5, 1.0))
    if act == "RELU6":
        out_s = _f32(max(out_s, 6 / 250))
    out_zp = int(rng.integers(-128, 128))
    ident = np.zeros((cin, 1, 1, cin), np.int8)
    ident[np.arange(cin), 0, 0, np.arange(cin)] = 127
    wscale = _f32(1 / 127)
    cp = conv2d.prepare(s1, zp1, [wscale], s2, zp2, "NONE", in_hw=(h, w), k_hw=(1, 1))
    first = bool(rng.random() < 0.5)
    q = [(s1, zp1), (s2, zp2)] if first else [(s2, zp2), (s1, zp1)]
    ap = add.prepare(*q[0], *q[1], out_s, out_zp, act)
    t = {
        "x": _act_tensor("x", shape, s1, zp1),
        "w": Tensor("w", ident.shape, "int8", QParams([wscale], [0]), ident),
        "x2": _act_tensor("x2", shape, s2, zp2),
        "y": _act_tensor("y", shape, out_s, out_zp),
    }
    ops = [
        Op(conv2d.KIND, ["x", "w"], ["x2"], cp),
        Op(add.KIND, ["x", "x2"] if first else ["x2", "x"], ["y"], ap),
    ]
    g = Graph(t, ops, "x", "y", "add")
    g.validate()
    return g, _input(rng, int(rng.integers(1, 4)), shape, zp1)


def reshape_case(rng: np.random.Generator) -> tuple[Graph, np.ndarray]:
    h, w, cin = (int(v) for v in rng.integers(1, 7, 3))
    s, zp = _f32(10 ** rng.uniform(-3, 0)), int(rng.integers(-128, 128))
    t = {"x": _act_tensor("x", (h, w, cin), s, zp), "y": _act_tensor("y", (h * w * cin,), s, zp)}
    g = Graph(t, [Op(reshape.KIND, ["x"], ["y"], {})], "x", "y", "reshape")
    g.validate()
    return g, _input(rng, int(rng.integers(1, 4)), (h, w, cin), zp)


CASES = {
    "conv": conv_case,
    "depthwise": depthwise_case,
    "avg_pool": lambda rng: pool_case(rng, "avg"),
    "max_pool": lambda rng: pool_case(rng, "max"),
    "mean": mean_case,
    "add": add_case,
    "reshape": reshape_case,
}
