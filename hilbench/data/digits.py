"""scikit-learn's 8x8 digits (1,797 images, 10 classes), shipped offline, split once, and the
same split rotated (``digits-rotN``: the digits' domain-shifted fine-tuning task)."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np

from hilbench.data.dataset import Dataset

TEST_FRACTION = 0.2
SPLIT_SEED = 20261129  # fixed: every run, backend and session sees the same split


def digits_file() -> Path:
    """scikit-learn's ``datasets/data/digits.csv.gz``, found without importing scikit-learn
    (1.8 s of imports per process, for one CSV file)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("scikit-learn is not installed: pip install scikit-learn")
    return Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz"


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """(pixels float64 (1797, 64) in 0..16, labels int (1797,)): what scikit-learn's
    ``load_digits`` reads from the same file (one row per image, its label last)."""
    with gzip.open(digits_file(), "rt") as f:
        table = np.loadtxt(f, delimiter=",")
    return table[:, :-1], table[:, -1].astype(int)


def digits() -> Dataset:
    pixels, labels = load_digits()
    x = (pixels / 16.0).astype(np.float32)
    y = labels.astype(np.uint8)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
    n_test = round(len(y) * TEST_FRACTION)
    test, train = order[:n_test], order[n_test:]
    return Dataset("digits", x[train], y[train], x[test], y[test], 10)


def rotate_images(x: np.ndarray, degrees: float, side: int = 8) -> np.ndarray:
    """Rotate flat ``side`` x ``side`` images counter-clockwise about their centre (bilinear,
    zeros outside, same size), clipped to [0, 1]."""
    # imported here: scipy.ndimage is slow to import, and only rotated digits need it
    from scipy.ndimage import rotate

    img = x.reshape(-1, side, side)
    out = rotate(img, degrees, axes=(2, 1), reshape=False, order=1, mode="constant", cval=0.0)
    return np.clip(out, 0.0, 1.0).astype(np.float32).reshape(x.shape)


def digits_rotated(degrees: int) -> Dataset:
    """The digits split, every image rotated by ``degrees`` (the domain-shift task)."""
    d = digits()
    return Dataset(
        f"digits-rot{degrees}",
        rotate_images(d.x_train, degrees),
        d.y_train,
        rotate_images(d.x_test, degrees),
        d.y_test,
        d.n_classes,
    )
