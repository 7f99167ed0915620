"""Data sets by name (the registry: each name to its loader; every loader returns a
:class:`hilbench.data.dataset.Dataset`).

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

from hilbench.data import vision
from hilbench.data.dataset import Dataset
from hilbench.data.digits import digits, digits_rotated
from hilbench.errors import ConfigError

DATASETS = {"digits": digits, "digits-rot20": lambda: digits_rotated(20)}
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
        data = vision.load(name, resolution or VISION_RESOLUTION)
    elif resolution is not None:
        raise ConfigError(
            f"dataset {name} has no resolution to set ({resolution})",
            "leave out the resolution, or train a vision model on an image data set",
        )
    elif name in DATASETS:
        data = DATASETS[name]()
    elif rot and 1 <= int(rot.group(1)) <= 359:
        data = digits_rotated(int(rot.group(1)))
    else:
        known = ", ".join([*sorted(DATASETS), *IMAGE_DATASETS])
        raise ConfigError(
            f"unknown dataset '{name}'",
            f"use one of: {known} (or digits-rotN, eurosat:DIR, stl10:DIR)",
        )
    _CACHE[key] = data
    return data
