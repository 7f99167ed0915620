"""Float32 reference networks: the float side of every zoo model (calibration, pre-training).

A :class:`FloatModel` is a list of layers over named NHWC tensors (batch axis first). Weight
layouts are TFLite's: conv ``[out, kh, kw, in]``, depthwise ``[1, kh, kw, in * mult]``, fully
connected ``[out, in]``. :meth:`FloatModel.forward` returns every tensor; :func:`backward`
gives weight gradients for the layers pre-training needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu.ops import common as c

WEIGHT_KINDS = ("conv", "dwconv", "fc")


@dataclass
class Layer:
    """One float layer; ``act`` is the fused activation (NONE, RELU, RELU6)."""

    name: str
    kind: str  # conv, dwconv, fc, avgpool, maxpool, mean, add, flatten
    inputs: list[str]
    output: str
    act: str = "NONE"
    kernel: int = 1
    stride: int = 1
    dilation: int = 1
    padding: str = "SAME"
    multiplier: int = 1
    w: np.ndarray | None = None
    b: np.ndarray | None = None

    def geometry(self, in_hw: tuple[int, int]) -> dict[str, int]:
        oh, ow, pt, pl = c.geometry(
            self.padding,
            in_hw,
            (self.kernel, self.kernel),
            (self.stride, self.stride),
            (self.dilation, self.dilation),
        )
        return {
            "out_h": oh,
            "out_w": ow,
            "pad_top": pt,
            "pad_left": pl,
            "stride_h": self.stride,
            "stride_w": self.stride,
            "dilation_h": self.dilation,
            "dilation_w": self.dilation,
        }


@dataclass
class FloatModel:
    """Layers in execution order from the tensor ``input`` to the tensor ``logits``."""

    name: str
    input_shape: tuple[int, ...]
    layers: list[Layer] = field(default_factory=list)

    def weight_layers(self) -> list[Layer]:
        return [ly for ly in self.layers if ly.kind in WEIGHT_KINDS]

    def weights(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(w, b)`` of every weight layer, execution order (not copied)."""
        return [(ly.w, ly.b) for ly in self.weight_layers()]

    def set_weights(self, pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Replace the weights; ModelError unless shapes match layer for layer."""
        layers = self.weight_layers()
        want = [(ly.w.shape, ly.b.shape) for ly in layers]
        got = [(np.shape(w), np.shape(b)) for w, b in pairs]
        if got != want:
            raise ModelError(
                f"float_weights shapes {got} do not fit model {self.name}",
                f"pass (w, b) pairs shaped {want}",
            )
        for ly, (w, b) in zip(layers, pairs, strict=True):
            ly.w, ly.b = np.asarray(w, np.float32), np.asarray(b, np.float32)

    def forward(self, x: np.ndarray, dtype: type = np.float32) -> dict[str, np.ndarray]:
        """Every tensor by name for float inputs ``x`` (N, *input_shape), computed in ``dtype``
        (float32 for training; float64 for calibration, see :func:`quantize_model`)."""
        env = {"input": np.asarray(x, dtype)}
        for ly in self.layers:
            env[ly.output] = _activate(_forward(ly, [env[n] for n in ly.inputs]), ly.act)
        return env


def _activate(y: np.ndarray, act: str) -> np.ndarray:
    if act == "RELU":
        return np.maximum(y, 0.0)
    if act == "RELU6":
        return np.clip(y, 0.0, 6.0)
    return y


def _cols(ly: Layer, x: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    p = ly.geometry(x.shape[1:3])
    k = (ly.kernel, ly.kernel)
    xp = c.padded(x, p, k, 0.0)
    return np.concatenate([v for _, _, v in c.taps(xp, p, k)], axis=-1), p


def _forward(ly: Layer, xs: list[np.ndarray]) -> np.ndarray:
    x = xs[0]
    if ly.kind == "conv":
        cols, _ = _cols(ly, x)
        return cols @ ly.w.reshape(ly.w.shape[0], -1).T + ly.b
    if ly.kind == "dwconv":
        xm = np.repeat(x, ly.multiplier, axis=-1) if ly.multiplier > 1 else x
        p = ly.geometry(x.shape[1:3])
        xp = c.padded(xm, p, (ly.kernel, ly.kernel), 0.0)
        out = sum(v * ly.w[0, ky, kx] for ky, kx, v in c.taps(xp, p, (ly.kernel, ly.kernel)))
        return out + ly.b
    if ly.kind == "fc":
        return x.reshape(len(x), -1) @ ly.w.T + ly.b
    if ly.kind == "flatten":
        return x.reshape(len(x), -1)
    if ly.kind == "mean":
        return x.mean(axis=(1, 2))
    if ly.kind == "add":
        return xs[0] + xs[1]
    if ly.kind in ("avgpool", "maxpool"):
        p = ly.geometry(x.shape[1:3])
        k = (ly.kernel, ly.kernel)
        if ly.kind == "maxpool":
            xp = c.padded(x, p, k, -np.inf)
            return np.max([v for _, _, v in c.taps(xp, p, k)], axis=0)
        xp = c.padded(x, p, k, 0.0)
        total = sum(v for _, _, v in c.taps(xp, p, k))
        return total / c.valid_counts(p, x.shape[1:3], k)[:, :, None]
    raise ModelError(f"float layer kind {ly.kind!r} unknown", "use conv, dwconv, fc, ...")


def backward(
    model: FloatModel, env: dict[str, np.ndarray], grad_out: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Gradients ``(dw, db)`` of every weight layer given d(loss)/d(logits). Supports the
    layers pre-training uses: conv, dwconv (multiplier 1), fc, maxpool, flatten, mean, add."""
    grads: dict[str, np.ndarray] = {model.layers[-1].output: grad_out}
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for ly in reversed(model.layers):
        g = grads.pop(ly.output, None)
        if g is None:
            continue
        y = env[ly.output]
        if ly.act == "RELU":
            g = g * (y > 0)
        elif ly.act == "RELU6":
            g = g * ((y > 0) & (y < 6))
        x = env[ly.inputs[0]]
        if ly.kind == "fc":
            xf = x.reshape(len(x), -1)
            out[ly.name] = (g.T @ xf, g.sum(0))
            dx = (g @ ly.w).reshape(x.shape)
        elif ly.kind == "conv":
            cols, p = _cols(ly, x)
            o = ly.w.shape[0]
            out[ly.name] = (
                (g.reshape(-1, o).T @ cols.reshape(-1, cols.shape[-1])).reshape(ly.w.shape),
                g.reshape(-1, o).sum(0),
            )
            dcols = g @ ly.w.reshape(o, -1)
            dx = _col2im(ly, dcols, x.shape, p)
        elif ly.kind == "dwconv":
            out[ly.name], dx = _dwconv_backward(ly, x, g)
        elif ly.kind == "maxpool":
            dx = _maxpool_backward(ly, x, g)
        elif ly.kind == "flatten":
            dx = g.reshape(x.shape)
        elif ly.kind == "mean":
            dx = np.broadcast_to(g[:, None, None, :] / (x.shape[1] * x.shape[2]), x.shape)
        elif ly.kind == "add":
            _accumulate(grads, ly.inputs[1], g)
            dx = g
        else:
            raise ModelError(
                f"pre-training does not support layer kind {ly.kind!r}",
                "pre-train models built from conv, dwconv, fc, maxpool, flatten, mean, add",
            )
        _accumulate(grads, ly.inputs[0], dx)
    return [out[ly.name] for ly in model.weight_layers()]


def _accumulate(grads: dict[str, np.ndarray], name: str, g: np.ndarray) -> None:
    grads[name] = grads[name] + g if name in grads else g


def _col2im(ly: Layer, dcols: np.ndarray, xshape: tuple[int, ...], p: dict[str, int]) -> np.ndarray:
    k = ly.kernel
    cin = xshape[-1]
    h, w = xshape[1:3]
    need_h = (p["out_h"] - 1) * ly.stride + (k - 1) * ly.dilation + 1
    need_w = (p["out_w"] - 1) * ly.stride + (k - 1) * ly.dilation + 1
    hp = max(h + p["pad_top"], need_h)
    wp = max(w + p["pad_left"], need_w)
    dxp = np.zeros((xshape[0], hp, wp, cin), np.float32)
    for i, (_, _, view) in enumerate(c.taps(dxp, p, (k, k))):
        view += dcols[..., i * cin : (i + 1) * cin]
    return dxp[:, p["pad_top"] : p["pad_top"] + h, p["pad_left"] : p["pad_left"] + w]


def _crop(ly: Layer, dxp: np.ndarray, xshape: tuple[int, ...], p: dict[str, int]) -> np.ndarray:
    h, w = xshape[1:3]
    return dxp[:, p["pad_top"] : p["pad_top"] + h, p["pad_left"] : p["pad_left"] + w]


def _dwconv_backward(
    ly: Layer, x: np.ndarray, g: np.ndarray
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """((dw, db), dx) of a depthwise convolution with channel multiplier 1."""
    if ly.multiplier != 1:
        raise ModelError(
            f"pre-training supports depthwise multiplier 1, not {ly.multiplier} ({ly.name})",
            "use multiplier 1",
        )
    p = ly.geometry(x.shape[1:3])
    k = (ly.kernel, ly.kernel)
    xp = c.padded(x, p, k, 0.0)
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(ly.w)
    dx_views = dict(((ky, kx), v) for ky, kx, v in c.taps(dxp, p, k))
    for ky, kx, v in c.taps(xp, p, k):
        dw[0, ky, kx] = (g * v).sum(axis=(0, 1, 2))
        dx_views[(ky, kx)] += g * ly.w[0, ky, kx]
    return (dw, g.sum(axis=(0, 1, 2))), _crop(ly, dxp, x.shape, p)


def _maxpool_backward(ly: Layer, x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """dx of a max pool: each output's gradient goes to its first largest input."""
    p = ly.geometry(x.shape[1:3])
    k = (ly.kernel, ly.kernel)
    xp = c.padded(x, p, k, -np.inf)
    views = [v for _, _, v in c.taps(xp, p, k)]
    winner = np.argmax(np.stack(views), axis=0)
    dxp = np.zeros(xp.shape, np.float32)
    for i, (_, _, v) in enumerate(c.taps(dxp, p, k)):
        v += g * (winner == i)
    return _crop(ly, dxp, x.shape, p)
