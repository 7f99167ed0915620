"""Short, deterministic host-side float pre-training (numpy only) of the zoo's small models.

The ZO studies fine-tune int8 models from these weights: ``pretrain("cnn", x, y, seed=s)``
returns ``(w, b)`` pairs that ``zoo.build("cnn", seed=s, calibration=x, float_weights=...)``
quantizes. Softmax cross-entropy, Adam (beta 0.9 / 0.999), mini-batches shuffled by
``default_rng(seed)``, He-normal initialisation from the same generator. Deterministic for a
given numpy/BLAS build and thread count.
"""

from __future__ import annotations

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu import nets
from hilbench.npu.floatnet import FloatModel, backward

FloatLayers = list[tuple[np.ndarray, np.ndarray]]

DEFAULTS: dict[str, dict[str, float]] = {
    "mlp": {"epochs": 30, "lr": 3e-3, "batch_size": 32},
    "cnn": {"epochs": 20, "lr": 1e-2, "batch_size": 32},
    "mobilenet_v2": {"epochs": 6, "lr": 1e-3, "batch_size": 32},
    "resnet18": {"epochs": 6, "lr": 1e-3, "batch_size": 32},
}


def softmax_xent_grad(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy and its gradient w.r.t. the logits."""
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    n = len(y)
    loss = float(-np.log(p[np.arange(n), y] + 1e-12).mean())
    p[np.arange(n), y] -= 1.0
    return loss, (p / n).astype(np.float32)


class Adam:
    """Adam over a list of arrays, updated in place."""

    def __init__(
        self,
        params: list[np.ndarray],
        lr: float,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-8,
    ) -> None:
        self.params, self.lr, self.b1, self.b2, self.eps = params, lr, b1, b2, eps
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, grads: list[np.ndarray]) -> None:
        self.t += 1
        c1, c2 = 1 - self.b1**self.t, 1 - self.b2**self.t
        for p, g, m, v in zip(self.params, grads, self.m, self.v, strict=True):
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            p -= (self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)).astype(p.dtype)


def train(
    model: FloatModel,
    x: np.ndarray,
    y: np.ndarray,
    *,
    rng: np.random.Generator,
    epochs: int,
    lr: float,
    batch_size: int,
) -> list[float]:
    """Train ``model`` in place; returns the mean loss of every epoch."""
    params = [a for ly in model.weight_layers() for a in (ly.w, ly.b)]
    opt = Adam(params, lr)
    history = []
    for _ in range(int(epochs)):
        order = rng.permutation(len(x))
        total = 0.0
        for start in range(0, len(x), int(batch_size)):
            idx = order[start : start + int(batch_size)]
            env = model.forward(x[idx])
            loss, g = softmax_xent_grad(env["logits"], y[idx])
            total += loss * len(idx)
            opt.step([a for pair in backward(model, env, g) for a in pair])
        history.append(total / len(x))
    return history


def pretrain(
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    *,
    seed: int,
    epochs: int | None = None,
    lr: float | None = None,
    batch_size: int | None = None,
    **arch: object,
) -> FloatLayers:
    """Float weights of zoo model ``name`` trained on float inputs ``x`` (N, ...) in [0, 1]
    and integer labels ``y``; ``arch`` goes to the architecture (e.g. ``sizes`` for mlp)."""
    if name not in DEFAULTS:
        raise ModelError(
            f"pre-training supports {sorted(DEFAULTS)}, not {name!r}",
            f"pre-train one of {', '.join(DEFAULTS)}",
        )
    rng = np.random.default_rng(seed)
    model = nets.float_model(name, rng, **arch)
    x = np.asarray(x, np.float32)
    if (
        len(x) != len(y)
        or not len(x)
        or int(np.prod(x.shape[1:])) != int(np.prod(model.input_shape))
    ):
        raise ModelError(
            f"training data x {x.shape} / y {np.shape(y)} do not fit {name} "
            f"input {model.input_shape}",
            "pass N inputs and N labels",
        )
    x = x.reshape(len(x), *model.input_shape)
    y = np.asarray(y, np.int64)
    kw = dict(DEFAULTS[name])
    kw.update(
        {
            k: v
            for k, v in (("epochs", epochs), ("lr", lr), ("batch_size", batch_size))
            if v is not None
        }
    )
    train(model, x, y, rng=rng, **kw)
    return [(w.copy(), b.copy()) for w, b in model.weights()]
