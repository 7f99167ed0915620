"""Data sets: the :class:`Dataset` type (``dataset``, below everything), loaders of each
source (the digits; image data sets from published formats: EuroSAT, STL-10, Fashion-MNIST's
IDX files, with resizing, the shifted fine-tuning task and an on-disk cache) and the registry
that names them (``registry``, above the loaders). ``hilbench.data.load(name)`` is the one way
in; each image loader returns uint8 (N, H, W, C) images and labels.
"""

from hilbench.data.dataset import Dataset, quantize_inputs
from hilbench.data.digits import rotate_images
from hilbench.data.registry import (
    DATASETS,
    FOLDER_DATASETS,
    IMAGE_DATASETS,
    VISION_RESOLUTION,
    is_image_dataset,
    load,
)

__all__ = [
    "DATASETS",
    "FOLDER_DATASETS",
    "IMAGE_DATASETS",
    "VISION_RESOLUTION",
    "Dataset",
    "is_image_dataset",
    "load",
    "quantize_inputs",
    "rotate_images",
]
