"""The colour image data sets as :class:`hilbench.data.dataset.Dataset` at a resolution: the
Fashion-MNIST tasks (deterministic split, cached on disk) and the user's EuroSAT / STL-10."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hilbench.data import cache, eurosat, fashion, images, stl10
from hilbench.data.dataset import Dataset
from hilbench.errors import ConfigError

TEST_FRACTION = 0.2  # EuroSAT has no published split
SPLIT_SEED = 20261201
MIN_RESOLUTION, MAX_RESOLUTION = 8, 224


def check_resolution(resolution: int) -> None:
    if not isinstance(resolution, int) or not MIN_RESOLUTION <= resolution <= MAX_RESOLUTION:
        raise ConfigError(
            f"resolution {resolution!r} is out of range",
            f"use an image side in {MIN_RESOLUTION}..{MAX_RESOLUTION}, e.g. 24 or 32",
        )


def load(name: str, resolution: int) -> Dataset:
    check_resolution(resolution)
    kind, _, arg = name.partition(":")
    if kind in ("eurosat", "stl10"):
        arg, limit = _limit(name, arg)
        if not arg:
            raise ConfigError(
                f"dataset '{name}' names no folder", f"write {kind}:DIR, e.g. {kind}:~/data/{kind}"
            )
        folder = Path(arg).expanduser()
        parts = _eurosat(folder) if kind == "eurosat" else _stl10(folder)
        x_tr, y_tr, x_te, y_te = _subset(parts, limit)
        return Dataset(
            name,
            images.to_float_rgb(x_tr, resolution),
            y_tr,
            images.to_float_rgb(x_te, resolution),
            y_te,
            10,
        )
    shift = (fashion.GARMENT_MIN, fashion.BACKGROUND_MAX, fashion.SHIFT_SEED)
    key = f"{name}|{resolution}|{fashion.SOURCE_ITEMS}|{fashion.TARGET_TRAIN}|{shift}"
    arrays = cache.cached("data", key, lambda: _fashion(name, resolution))
    return Dataset(
        name, arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"], 10
    )


def _limit(name: str, arg: str) -> tuple[str, int | None]:
    """``DIR@N`` -> (DIR, N): at most N items of each split (a device's memory holds them)."""
    folder, at, n = arg.rpartition("@")
    if not at:
        return arg, None
    if not n.isdigit() or int(n) < 1:
        raise ConfigError(
            f"dataset '{name}': '@{n}' is not a number of items",
            "write KIND:DIR@N with N >= 1, e.g. stl10:~/stl10_binary@1000",
        )
    return folder, int(n)


def _subset(parts, limit: int | None):
    """At most ``limit`` items of each split, picked by a fixed permutation."""
    if limit is None:
        return parts
    x_tr, y_tr, x_te, y_te = parts
    rng = np.random.default_rng(SPLIT_SEED)
    tr = np.sort(rng.permutation(len(y_tr))[:limit])
    te = np.sort(rng.permutation(len(y_te))[:limit])
    return x_tr[tr], y_tr[tr], x_te[te], y_te[te]


def _eurosat(folder: Path):
    x, y, _ = eurosat.load(folder)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
    n_test = max(1, round(len(y) * TEST_FRACTION)) if len(y) > 1 else 0
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def _stl10(folder: Path):
    if not Path(folder).is_dir():
        raise ConfigError(
            f"STL-10: {folder} is not a folder",
            "point at stl10_binary/ (train_X.bin, train_y.bin, test_X.bin, test_y.bin)",
        )
    x_tr, y_tr = stl10.load_split(folder, "train")
    x_te, y_te = stl10.load_split(folder, "test")
    return x_tr, y_tr, x_te, y_te


def _fashion(name: str, resolution: int) -> dict[str, np.ndarray]:
    ix = fashion.indices()
    x_train_all, y_train_all = fashion.load_split("train")
    x_test_all, y_test_all = fashion.load_split("test")
    test = images.to_float_rgb(x_test_all[ix["target_test"]], resolution)
    y_test = y_test_all[ix["target_test"]]
    part = "source" if name == "fashion-mnist-source" else "target_train"
    train = images.to_float_rgb(x_train_all[ix[part]], resolution)
    y_train = y_train_all[ix[part]]
    if name == "fashion-mnist-shift":
        train = fashion.shift(train, ix["target_train"])
        test = fashion.shift(test, ix["target_test"] + 60_000)  # other draws than training's
    return {"x_train": train, "y_train": y_train, "x_test": test, "y_test": y_test}


def fashion_heldout(name: str, resolution: int) -> tuple[np.ndarray, np.ndarray]:
    """(float RGB inputs, labels) of ``name``'s held-out test items (Fashion-MNIST's test file
    less the 512 a run evaluates on), prepared as that data set's test items are."""
    ix = fashion.indices()["target_heldout"]
    x_all, y_all = fashion.load_split("test")
    x = images.to_float_rgb(x_all[ix], resolution)
    if name == "fashion-mnist-shift":
        x = fashion.shift(x, ix + 60_000)
    return x, y_all[ix]
