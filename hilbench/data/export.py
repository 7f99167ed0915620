"""A data set's split as a model's device sees it: X quantized with the model's input scale and
zero point (:func:`hilbench.data.quantize_inputs`, as ``hilbench run`` does), y the labels
(``hilbench data export``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hilbench import data as datasets
from hilbench.errors import HilbenchError

SPLITS = ("train", "test")


@dataclass(frozen=True)
class Split:
    x: np.ndarray  # int8 (N, *model input shape)
    y: np.ndarray  # uint8 (N,)
    scale: float
    zero_point: int


def quantized_split(name: str, split: str, graph: Any) -> Split:
    """Split ``split`` of data set ``name`` quantized for ``graph``'s input; images resized to
    the model's input side."""
    if split not in SPLITS:
        raise HilbenchError(f"unknown split {split!r}", f"use one of {', '.join(SPLITS)}")
    shape = tuple(int(d) for d in graph.input_shape)
    resolution = shape[0] if datasets.is_image_dataset(name) and len(shape) == 3 else None
    data = datasets.load(name, resolution)
    x, y = (data.x_train, data.y_train) if split == "train" else (data.x_test, data.y_test)
    if int(np.prod(x.shape[1:])) != int(np.prod(shape)):
        raise HilbenchError(
            f"data set {name} has items of shape {x.shape[1:]}, the model takes {shape}",
            "export a data set whose items fit the model's input",
        )
    q = graph.tensors[graph.input].qparams
    scale, zero = float(q.scale[0]), int(q.zero_point[0])
    xq = datasets.quantize_inputs(x, scale, zero).reshape((len(x), *shape))
    return Split(xq, np.asarray(y, np.uint8), scale, zero)


def write_split(s: Split, out: Path, meta: dict[str, Any]) -> list[Path]:
    """``x.npy``, ``y.npy`` and ``meta.json`` in directory ``out``."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / "x.npy", out / "y.npy", out / "meta.json"]
        np.save(paths[0], s.x, allow_pickle=False)
        np.save(paths[1], s.y, allow_pickle=False)
        info = {**meta, "items": len(s.y), "input_scale": s.scale, "input_zero_point": s.zero_point}
        paths[2].write_text(json.dumps(info, indent=1) + "\n")
    except OSError as e:
        raise HilbenchError(
            f"cannot write {out}: {e.strerror or e}", "choose a writable -o DIR"
        ) from None
    return paths
