"""Data sets by name.

- ``digits``: scikit-learn's 8x8 digits (1,797 images, 10 classes), shipped offline, and
  ``digits-rotN`` the same split rotated by N degrees (``digits-rot20``: the digits' domain-
  shifted fine-tuning task).
- Colour images for the vision models (MobileNetV2, ResNet18), resized to ``resolution``:
  ``fashion-mnist`` (real photographs from Debian's dataset-fashion-mnist, copied to RGB) and
  ``fashion-mnist-shift`` (the same items recoloured on textured backgrounds: the vision
  study's fine-tuning task, a shift made by us; :mod:`hilbench.data.fashion`), with
  ``fashion-mnist-source`` the disjoint items a vision model is pre-trained on;
  ``eurosat:DIR`` (EuroSAT RGB) and ``stl10:DIR`` (STL-10's binary files) from a folder the
  user has (``DIR@N``: at most N items of each split, picked by a fixed permutation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from hilbench.errors import ConfigError

TEST_FRACTION = 0.2
SPLIT_SEED = 20261129  # fixed: every run, backend and session sees the same split


@dataclass(frozen=True)
class Dataset:
    """Float inputs in [0, 1] with integer labels, split into train and test."""

    name: str
    x_train: np.ndarray  # float32 (N, *input_shape)
    y_train: np.ndarray  # uint8 (N,)
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


def _digits() -> Dataset:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.data / 16.0).astype(np.float32)
    y = bunch.target.astype(np.uint8)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
    n_test = round(len(y) * TEST_FRACTION)
    test, train = order[:n_test], order[n_test:]
    return Dataset("digits", x[train], y[train], x[test], y[test], 10)


def rotate_images(x: np.ndarray, degrees: float, side: int = 8) -> np.ndarray:
    """Rotate flat ``side`` x ``side`` images counter-clockwise about their centre (bilinear,
    zeros outside, same size), clipped to [0, 1]."""
    from scipy.ndimage import rotate

    img = x.reshape(-1, side, side)
    out = rotate(img, degrees, axes=(2, 1), reshape=False, order=1, mode="constant", cval=0.0)
    return np.clip(out, 0.0, 1.0).astype(np.float32).reshape(x.shape)


def _digits_rotated(degrees: int) -> Dataset:
    """The digits split, every image rotated by ``degrees`` (the domain-shift task)."""
    d = _digits()
    return Dataset(
        f"digits-rot{degrees}",
        rotate_images(d.x_train, degrees),
        d.y_train,
        rotate_images(d.x_test, degrees),
        d.y_test,
        d.n_classes,
    )


DATASETS = {"digits": _digits, "digits-rot20": lambda: _digits_rotated(20)}
#: Colour image data sets (``load(name, resolution)``); FOLDER_DATASETS take ``KIND:DIR``.
IMAGE_DATASETS = ("fashion-mnist", "fashion-mnist-shift", "fashion-mnist-source")
FOLDER_DATASETS = ("eurosat", "stl10")
VISION_RESOLUTION = 24  # the side images are resized to unless a resolution is given
_CACHE: dict[tuple[str, int | None], Dataset] = {}


def is_image_dataset(name: str) -> bool:
    """True for the colour image data sets (they take a resolution)."""
    return name in IMAGE_DATASETS or name.partition(":")[0] in FOLDER_DATASETS


def load(name: str, resolution: int | None = None) -> Dataset:
    """The data set called ``name``: ``digits``, ``digits-rot20`` or ``digits-rotN`` for any
    whole number of degrees N in 1..359 (same split, images rotated); or a colour image data
    set (see the module docstring) as float (N, R, R, 3) with R = ``resolution`` (default
    ``VISION_RESOLUTION``). The digits take no resolution."""
    key = (name, resolution)
    if key in _CACHE:
        return _CACHE[key]
    rot = re.fullmatch(r"digits-rot(\d{1,3})", name)
    if is_image_dataset(name):
        from hilbench.data import vision

        data = vision.load(name, resolution or VISION_RESOLUTION)
    elif resolution is not None:
        raise ConfigError(
            f"dataset {name} has no resolution to set ({resolution})",
            "leave out the resolution, or train a vision model on an image data set",
        )
    elif name in DATASETS:
        data = DATASETS[name]()
    elif rot and 1 <= int(rot.group(1)) <= 359:
        data = _digits_rotated(int(rot.group(1)))
    else:
        known = ", ".join([*sorted(DATASETS), *IMAGE_DATASETS])
        raise ConfigError(
            f"unknown dataset '{name}'",
            f"use one of: {known} (or digits-rotN, eurosat:DIR, stl10:DIR)",
        )
    _CACHE[key] = data
    return data


def quantize_inputs(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Float inputs to the model's int8 input quantization (round half away from zero)."""
    q = np.trunc(x / scale + np.copysign(0.5, x)) + zero_point
    return np.clip(q, -128, 127).astype(np.int8)
