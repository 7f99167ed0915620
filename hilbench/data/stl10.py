"""STL-10's binary format (Coates et al. 2011): ``train_X.bin`` / ``test_X.bin`` hold uint8
images of 3x96x96 in column-major order, one after another; ``train_y.bin`` / ``test_y.bin``
one uint8 label 1..10 per image; ``class_names.txt`` optional."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hilbench.errors import ConfigError

SIDE = 96
CHANNELS = 3
IMAGE_BYTES = CHANNELS * SIDE * SIDE
CLASSES = 10


def decode_images(raw: bytes | np.ndarray) -> np.ndarray:
    """Column-major 3x96x96 records to (N, 96, 96, 3) rows-first images."""
    a = np.frombuffer(raw, np.uint8) if isinstance(raw, bytes) else np.asarray(raw, np.uint8)
    return a.reshape(-1, CHANNELS, SIDE, SIDE).transpose(0, 3, 2, 1)


def encode_images(images: np.ndarray) -> bytes:
    """(N, 96, 96, 3) images to STL-10's column-major records (the inverse of decode)."""
    return np.ascontiguousarray(np.asarray(images, np.uint8).transpose(0, 3, 2, 1)).tobytes()


def _read(path: Path) -> bytes:
    if not path.is_file():
        raise ConfigError(
            f"STL-10: {path} is missing",
            "point at the folder holding train_X.bin, train_y.bin, test_X.bin, test_y.bin "
            "(stl10_binary/ of the published archive)",
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", "check the file") from None


def load_split(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (N, 96, 96, 3), labels uint8 0..9) of ``split`` (train or test)."""
    folder = Path(folder)
    xp, yp = folder / f"{split}_X.bin", folder / f"{split}_y.bin"
    x_raw, y_raw = _read(xp), _read(yp)
    if not x_raw or len(x_raw) % IMAGE_BYTES:
        raise ConfigError(
            f"STL-10: {xp} holds {len(x_raw):,} bytes, not a whole number of 3x96x96 images "
            f"({IMAGE_BYTES:,} bytes each)",
            "the file is truncated or not STL-10's: fetch it again",
        )
    y = np.frombuffer(y_raw, np.uint8)
    n = len(x_raw) // IMAGE_BYTES
    if len(y) != n:
        raise ConfigError(
            f"STL-10: {yp} has {len(y):,} labels for the {n:,} images of {xp.name}",
            "use the label file that belongs to the images",
        )
    if len(y) and not (y.min() >= 1 and y.max() <= CLASSES):
        raise ConfigError(
            f"STL-10: {yp} holds label {int(y.min() if y.min() < 1 else y.max())}, "
            f"outside 1..{CLASSES}",
            "use STL-10's label file (labels 1..10)",
        )
    return decode_images(x_raw), (y - 1).astype(np.uint8)


def class_names(folder: Path) -> list[str]:
    p = Path(folder) / "class_names.txt"
    if p.is_file():
        names = [s.strip() for s in p.read_text(errors="replace").splitlines() if s.strip()]
        if len(names) == CLASSES:
            return names
    return [str(i) for i in range(1, CLASSES + 1)]
