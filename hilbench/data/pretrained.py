"""Float pre-training of the vision models on the Fashion-MNIST source task (grey images of
items the fine-tuning task never uses), deterministic for a seed and cached on disk: the first
run of a configuration trains for a few minutes on one core, later runs read the weights.

One pre-trained model per architecture (seed ``PRETRAIN_SEED``), whatever the run's seed, as
a fine-tuning study starts every run from the one published checkpoint: the run seeds vary
the fine-tuning only."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from hilbench.data import cache, registry
from hilbench.npu import pretrain

SOURCE = "fashion-mnist-source"
PRETRAIN_SEED = 0


def vision_weights(model: str, arch: dict, seed: int = PRETRAIN_SEED) -> tuple[list, object]:
    """(float (w, b) pairs of ``model`` sized by ``arch`` pre-trained from ``seed``, the
    source data set at the model's resolution)."""
    source = registry.load(SOURCE, int(arch["resolution"]))
    key = f"{model}|{sorted(arch.items())}|{seed}|{SOURCE}|{pretrain.DEFAULTS.get(model)}"

    def make() -> dict[str, np.ndarray]:
        with threadpool_limits(limits=1, user_api="blas"):  # one thread: the same bytes always
            pairs = pretrain.pretrain(model, source.x_train, source.y_train, seed=seed, **arch)
        out = {}
        for i, (w, b) in enumerate(pairs):
            out[f"w{i}"], out[f"b{i}"] = w, b
        return out

    arrays = cache.cached("pretrained", key, make)
    n = len(arrays) // 2
    return [(arrays[f"w{i}"], arrays[f"b{i}"]) for i in range(n)], source
