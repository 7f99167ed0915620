"""Float architectures of the zoo, He-normal initialised from a seeded generator.

- ``cnn``: the small CNN for 8x8 digits: conv3x3(8)+RELU, conv3x3 stride 2 (16)+RELU,
  flatten, FC(10) — 3,818 parameters.
- ``mobilenet_v2``: Sandler et al. 2018 (inverted residuals, linear bottlenecks, RELU6),
  width multiplier ``alpha``, channels rounded to multiples of 8, last conv 1280 channels
  (scaled when alpha > 1), global mean, FC.
- ``resnet18``: He et al. 2016 (BasicBlock x [2, 2, 2, 2], 7x7/2 stem + 3x3/2 max pool,
  1x1/2 projection shortcuts), channel ``width`` multiplier, global mean, FC. No batch norm
  (a BN-folded network has the same int8 graph); residual branches start scaled by 0.5.
"""

from __future__ import annotations

import itertools

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu.floatnet import FloatModel, Layer


class _Net:
    """Appends layers to a FloatModel, tracking the current tensor and its channel count."""

    def __init__(self, name: str, input_shape: tuple[int, ...], rng: np.random.Generator):
        self.model = FloatModel(name, tuple(input_shape))
        self.rng = rng
        self.cur, self.ch = "input", int(input_shape[-1])
        self.n = 0

    def _add(self, kind: str, inputs: list[str], out: str | None = None, **kw) -> str:
        name = f"{kind}{self.n}"
        self.n += 1
        out = out or f"{name}_out"
        self.model.layers.append(Layer(name, kind, inputs, out, **kw))
        self.cur = out
        return out

    def _he(self, shape: tuple[int, ...], fan_in: int, gain: float = 1.0) -> np.ndarray:
        std = gain * np.sqrt(2.0 / fan_in)
        return self.rng.normal(0.0, std, size=shape).astype(np.float32)

    def conv(
        self,
        out_ch: int,
        k: int,
        stride: int = 1,
        act: str = "RELU",
        gain: float = 1.0,
        src: str | None = None,
        in_ch: int | None = None,
    ) -> str:
        cin = self.ch if in_ch is None else in_ch
        w = self._he((out_ch, k, k, cin), k * k * cin, gain)
        out = self._add(
            "conv",
            [src or self.cur],
            act=act,
            kernel=k,
            stride=stride,
            w=w,
            b=np.zeros(out_ch, np.float32),
        )
        self.ch = out_ch
        return out

    def dwconv(self, k: int, stride: int = 1, act: str = "RELU6", multiplier: int = 1) -> str:
        oc = self.ch * multiplier
        w = self._he((1, k, k, oc), k * k)
        out = self._add(
            "dwconv",
            [self.cur],
            act=act,
            kernel=k,
            stride=stride,
            multiplier=multiplier,
            w=w,
            b=np.zeros(oc, np.float32),
        )
        self.ch = oc
        return out

    def fc(self, out_f: int, in_f: int, act: str = "NONE", out: str | None = None) -> str:
        w = self._he((out_f, in_f), in_f)
        return self._add("fc", [self.cur], out, act=act, w=w, b=np.zeros(out_f, np.float32))

    def pool(self, kind: str, k: int, stride: int, padding: str = "SAME") -> str:
        return self._add(kind, [self.cur], kernel=k, stride=stride, padding=padding)

    def add(self, a: str, b: str, act: str = "NONE") -> str:
        return self._add("add", [a, b], act=act)

    def mean(self) -> str:
        return self._add("mean", [self.cur])

    def flatten(self) -> str:
        return self._add("flatten", [self.cur])


def cnn(
    seed: int | np.random.Generator,
    channels: tuple[int, int] = (8, 16),
    classes: int = 10,
    resolution: int = 8,
) -> FloatModel:
    """The small digits CNN on (resolution, resolution, 1) inputs."""
    rng = np.random.default_rng(seed)
    n = _Net("cnn", (resolution, resolution, 1), rng)
    n.conv(channels[0], 3)
    n.conv(channels[1], 3, stride=2)
    side = (resolution + 1) // 2
    n.flatten()
    n.fc(classes, side * side * channels[1], out="logits")
    return n.model


def make_divisible(v: float, divisor: int = 8) -> int:
    """MobileNet's channel rounding: nearest multiple of ``divisor``, never 10 % below."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


MOBILENET_V2_BLOCKS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)  # (t, c, n, s)


def mobilenet_v2(
    seed: int | np.random.Generator, alpha: float = 0.35, resolution: int = 96, classes: int = 10
) -> FloatModel:
    if not alpha > 0 or resolution < 1 or classes < 1:
        raise ModelError(
            f"mobilenet_v2(alpha={alpha}, resolution={resolution}, classes={classes}) invalid",
            "use alpha > 0 and positive sizes",
        )
    rng = np.random.default_rng(seed)
    n = _Net("mobilenet_v2", (resolution, resolution, 3), rng)
    n.conv(make_divisible(32 * alpha), 3, stride=2, act="RELU6")
    for t, ch, reps, s in MOBILENET_V2_BLOCKS:
        out_ch = make_divisible(ch * alpha)
        for i in range(reps):
            src, in_ch = n.cur, n.ch
            stride = s if i == 0 else 1
            if t != 1:
                n.conv(in_ch * t, 1, act="RELU6")
            n.dwconv(3, stride=stride)
            n.conv(out_ch, 1, act="NONE", gain=0.5)
            if stride == 1 and in_ch == out_ch:
                n.add(src, n.cur)
    last = make_divisible(1280 * alpha) if alpha > 1.0 else 1280
    n.conv(last, 1, act="RELU6")
    n.mean()
    n.fc(classes, last, out="logits")
    return n.model


def resnet18(
    seed: int | np.random.Generator, width: float = 0.25, resolution: int = 64, classes: int = 10
) -> FloatModel:
    if not width > 0 or resolution < 1 or classes < 1:
        raise ModelError(
            f"resnet18(width={width}, resolution={resolution}, classes={classes}) invalid",
            "use width > 0 and positive sizes",
        )
    rng = np.random.default_rng(seed)
    n = _Net("resnet18", (resolution, resolution, 3), rng)
    chans = [max(1, round(c * width)) for c in (64, 128, 256, 512)]
    n.conv(chans[0], 7, stride=2)
    n.pool("maxpool", 3, 2)
    for stage, ch in enumerate(chans):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            src, in_ch = n.cur, n.ch
            n.conv(ch, 3, stride=stride)
            branch = n.conv(ch, 3, act="NONE", gain=0.5)
            short = src
            if stride != 1 or in_ch != ch:
                short = n.conv(ch, 1, stride=stride, act="NONE", src=src, in_ch=in_ch)
            n.add(short, branch, act="RELU")
            n.ch = ch
    n.mean()
    n.fc(classes, chans[-1], out="logits")
    return n.model


def mlp(seed: int | np.random.Generator, sizes: tuple[int, ...] = (64, 32, 10)) -> FloatModel:
    """The MLP of :func:`hilbench.npu.zoo.build_mlp` (same He-normal draws for a seed)."""
    rng = np.random.default_rng(seed)
    sizes = tuple(int(s) for s in sizes)
    n = _Net("mlp", (sizes[0],), rng)
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        last = i == len(sizes) - 2
        n.fc(fan_out, fan_in, act="NONE" if last else "RELU", out="logits" if last else None)
    return n.model


ARCHITECTURES = {"mlp": mlp, "cnn": cnn, "mobilenet_v2": mobilenet_v2, "resnet18": resnet18}


def float_model(name: str, seed: int | np.random.Generator, **kw: object) -> FloatModel:
    """The float architecture ``name`` initialised from ``seed``."""
    try:
        return ARCHITECTURES[name](seed, **kw)
    except KeyError:
        raise ModelError(
            f"unknown model {name!r}", f"use one of: {', '.join(sorted(ARCHITECTURES))}"
        ) from None
