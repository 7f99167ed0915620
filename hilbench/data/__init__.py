"""Image data sets for the vision models: loaders of published formats (EuroSAT, STL-10,
Fashion-MNIST's IDX files), resizing, the shifted fine-tuning task and the on-disk cache.
:mod:`hilbench.datasets` names them; each loader returns uint8 (N, H, W, C) images and labels.
"""
