"""Image arrays: uint8 (N, H, W, C) to float32 (N, R, R, 3) in [0, 1] at a model's resolution."""

from __future__ import annotations

import numpy as np


def to_float_rgb(images: np.ndarray, resolution: int) -> np.ndarray:
    """uint8 (N, H, W, C) with C 1 or 3 to float32 (N, R, R, 3) in [0, 1]: bilinear resize
    (scipy.ndimage.zoom, order 1, edges repeated), grey copied to the three channels."""
    from scipy.ndimage import zoom

    x = np.asarray(images, np.float32) / np.float32(255.0)
    if x.ndim == 3:
        x = x[..., None]
    _, h, w, c = x.shape
    if (h, w) != (resolution, resolution):
        x = zoom(x, (1, resolution / h, resolution / w, 1), order=1, mode="nearest", grid_mode=True)
    if c == 1:
        x = np.repeat(x, 3, axis=-1)
    return np.clip(x, 0.0, 1.0).astype(np.float32)
