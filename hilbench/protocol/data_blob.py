"""The LOAD_DATA payload.

``u32 n, u16 item_size, u16 n_classes, i8 inputs[n*item], u8 labels[n]``, little-endian.
"""

from __future__ import annotations

import numpy as np

HEADER_BYTES = 8


def encode(inputs: np.ndarray, labels: np.ndarray, n_classes: int) -> bytes:
    """The bytes for int8 inputs (N, ...) and labels (N,)."""
    flat = np.ascontiguousarray(inputs, dtype=np.int8).reshape(len(inputs), -1)
    header = np.array([len(flat)], "<u4").tobytes()
    header += np.array([flat.shape[1], n_classes], "<u2").tobytes()
    return header + flat.tobytes() + np.asarray(labels, dtype=np.uint8).tobytes()


def decode(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(inputs (n, item) int8, labels (n,) uint8); ValueError names what is inconsistent."""
    if len(blob) < HEADER_BYTES:
        raise ValueError(f"data blob is {len(blob)} bytes, shorter than its 8-byte header")
    n = int(np.frombuffer(blob[:4], "<u4")[0])
    item, n_classes = (int(v) for v in np.frombuffer(blob[4:8], "<u2"))
    expected = HEADER_BYTES + n * item + n
    if item == 0 or len(blob) != expected:
        raise ValueError(f"data blob is {len(blob)} bytes, its header says {expected}")
    inputs = np.frombuffer(blob, dtype=np.int8, count=n * item, offset=HEADER_BYTES)
    labels = np.frombuffer(blob, dtype=np.uint8, count=n, offset=HEADER_BYTES + n * item)
    if n and int(labels.max()) >= max(n_classes, 1):
        raise ValueError(f"a label is {int(labels.max())}, not below n_classes={n_classes}")
    return inputs.reshape(n, item).copy(), labels.copy()
