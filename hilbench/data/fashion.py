"""Fashion-MNIST (Xiao et al. 2017): 28x28 grey photographs of clothing in 10 classes, 60,000
training and 10,000 test images, read from the IDX files Debian's ``dataset-fashion-mnist``
package installs (or a folder named by ``HILBENCH_FASHION_MNIST``).

The vision study's tasks (docs/results-vision.md), split deterministically:

- source (pre-training, on the host, in float): ``SOURCE_ITEMS`` training images, grey;
- target (fine-tuning on the device): ``TARGET_TRAIN`` other training images and
  ``TARGET_TEST`` test images, each recoloured by :func:`shift`: the garment in a colour and
  the background a smooth coloured texture, both drawn per image from a seed -- a domain
  shift made by us, not part of the published data set.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hilbench.data import idx
from hilbench.errors import ConfigError

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
ENV_DIR = "HILBENCH_FASHION_MNIST"
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
CLASSES = 10
SPLIT_SEED = 20261201
SOURCE_ITEMS = 6000
TARGET_TRAIN = 768
TARGET_TEST = 512
SHIFT_SEED = 0x5348  # "SH"
GARMENT_MIN = 0.5  # each garment colour channel in [GARMENT_MIN, 1]
BACKGROUND_MAX = 0.25  # background texture channels in [0, BACKGROUND_MAX]


def folder() -> Path:
    return Path(os.environ.get(ENV_DIR) or DEBIAN_DIR)


def _file(d: Path, stem: str) -> Path:
    for name in (f"{stem}.gz", stem):
        if (d / name).is_file():
            return d / name
    raise ConfigError(
        f"Fashion-MNIST: {d / (stem + '.gz')} is missing",
        "install it with `apt-get install dataset-fashion-mnist`, or set "
        f"{ENV_DIR} to a folder holding the four IDX files",
    )


def load_split(split: str) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 images (N, 28, 28), uint8 labels) of ``split`` (train or test)."""
    d = folder()
    xi, yi = (_file(d, s) for s in FILES[split])
    x, y = idx.read_idx(xi), idx.read_idx(yi)
    if x.ndim != 3 or y.ndim != 1 or len(x) != len(y) or (len(y) and y.max() >= CLASSES):
        raise ConfigError(
            f"Fashion-MNIST: {xi.name} {x.shape} and {yi.name} {y.shape} do not go together",
            "use the images and labels of one split",
        )
    return x, y


def indices() -> dict[str, np.ndarray]:
    """The fixed item numbers of each part: source and target_train from the training file,
    target_test from the test file (disjoint by construction), and target_heldout: the test
    file's other items, which no run sees (the studies' final accuracy on 9,488 items)."""
    train = np.random.default_rng(SPLIT_SEED).permutation(60_000)
    test = np.random.default_rng(SPLIT_SEED + 1).permutation(10_000)
    return {
        "source": train[:SOURCE_ITEMS],
        "target_train": train[SOURCE_ITEMS : SOURCE_ITEMS + TARGET_TRAIN],
        "target_test": test[:TARGET_TEST],
        "target_heldout": test[TARGET_TEST:],
    }


def _smooth_noise(rng: np.random.Generator, side: int, cells: int = 4) -> np.ndarray:
    """(side, side, 3) in [0, 1]: a bilinear upsampling of a random cells x cells x 3 grid."""
    from scipy.ndimage import zoom

    grid = rng.random((cells, cells, 3))
    up = zoom(grid, (side / cells, side / cells, 1), order=1, mode="nearest", grid_mode=True)
    return np.clip(up, 0, 1)


def shift(images: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Recolour float RGB images (N, R, R, 3) in [0, 1] of grey garments on black: garment
    intensity g keeps its shape; the garment takes a colour, the background a textured
    colour of at most ``BACKGROUND_MAX``, both from ``default_rng((SHIFT_SEED, item))``."""
    out = np.empty_like(images)
    side = images.shape[1]
    for i, (img, item) in enumerate(zip(images, items, strict=True)):
        rng = np.random.default_rng((SHIFT_SEED, int(item)))
        g = img.mean(axis=-1, keepdims=True)
        colour = GARMENT_MIN + (1.0 - GARMENT_MIN) * rng.random(3)
        background = BACKGROUND_MAX * _smooth_noise(rng, side)
        out[i] = g * colour + (1.0 - g) * background
    return np.clip(out, 0.0, 1.0).astype(np.float32)
