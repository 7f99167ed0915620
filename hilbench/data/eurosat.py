"""EuroSAT (Helber et al. 2019), the RGB variant: one folder per land-use class holding
64x64 JPEG images (``AnnualCrop/AnnualCrop_1.jpg``, ...). The multispectral variant (13-band
GeoTIFF) is refused with a message. Labels are the class folders in alphabetical order."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hilbench.errors import ConfigError

SIDE = 64
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def _class_dirs(folder: Path) -> list[Path]:
    dirs = sorted(d for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))
    with_images = [d for d in dirs if any(_images(d))]
    if not with_images and len(dirs) == 1:  # the archive's own top folder (EuroSAT_RGB/, 2750/)
        return _class_dirs(dirs[0])
    return with_images


def _images(d: Path):
    return (p for p in d.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def load(folder: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(images uint8 (N, 64, 64, 3), labels uint8, class names) of the folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(
            f"EuroSAT: {folder} is not a folder",
            "point at the unpacked EuroSAT RGB archive (one folder per class of .jpg images)",
        )
    classes = _class_dirs(folder)
    if not classes:
        tifs = next(folder.rglob("*.tif"), None)
        if tifs is not None:
            raise ConfigError(
                f"EuroSAT: {folder} holds the multispectral variant (.tif, 13 bands), which "
                "hilbench does not read",
                "point at the RGB variant (EuroSAT_RGB, .jpg images)",
            )
        raise ConfigError(
            f"EuroSAT: {folder} has no class folders of .jpg images",
            "point at the unpacked EuroSAT RGB archive (AnnualCrop/, Forest/, ... of .jpg)",
        )
    from PIL import Image, UnidentifiedImageError

    images, labels = [], []
    for label, d in enumerate(classes):
        for p in sorted(_images(d)):
            try:
                with Image.open(p) as im:
                    a = np.asarray(im.convert("RGB"), np.uint8)
            except (OSError, UnidentifiedImageError) as exc:
                raise ConfigError(
                    f"EuroSAT: {p} is not a readable image ({exc})", "remove or replace the file"
                ) from None
            if a.shape != (SIDE, SIDE, 3):
                raise ConfigError(
                    f"EuroSAT: {p} is {a.shape[1]}x{a.shape[0]}, not {SIDE}x{SIDE}",
                    "use EuroSAT's own 64x64 images",
                )
            images.append(a)
            labels.append(label)
    return np.stack(images), np.asarray(labels, np.uint8), [d.name for d in classes]
