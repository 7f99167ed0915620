"""The LOAD_DATA payload (docs/protocol.md, "Data blob").

``u32 n_items, u16 item_size, u16 n_classes, i8 inputs[n_items*item_size], u8 labels[n_items]``,
little-endian; the header is the DATA_BLOB layout of :mod:`hilbench.protocol.spec`, the checks
a device makes are :func:`spec.check_data_blob`.
"""

from __future__ import annotations

import numpy as np

from hilbench.protocol import spec

HEADER_BYTES = spec.DATA_HEADER_BYTES


def encode(inputs: np.ndarray, labels: np.ndarray, n_classes: int) -> bytes:
    """The bytes for int8 inputs (N, ...) and labels (N,)."""
    flat = np.ascontiguousarray(inputs, dtype=np.int8).reshape(len(inputs), -1)
    header = np.array([len(flat)], "<u4").tobytes()
    header += np.array([flat.shape[1], n_classes], "<u2").tobytes()
    return header + flat.tobytes() + np.asarray(labels, dtype=np.uint8).tobytes()


def decode(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(inputs (n, item) int8, labels (n,) uint8); a MessageError (a ValueError) with the
    declared message a device answers (BAD_ARGUMENT) when the blob breaks a rule."""
    n, item, _ = spec.check_data_blob(blob)
    inputs = np.frombuffer(blob, dtype=np.int8, count=n * item, offset=HEADER_BYTES)
    labels = np.frombuffer(blob, dtype=np.uint8, count=n, offset=HEADER_BYTES + n * item)
    return inputs.reshape(n, item).copy(), labels.copy()


def n_classes(blob: bytes) -> int:
    """The n_classes field of a blob that passed :func:`decode`."""
    return int(np.frombuffer(blob, "<u2", 1, spec.LAYOUTS["DATA_BLOB"].offset("n_classes"))[0])
