"""Model preparation: the int8 model a run trains, packed with its loss tables and ZO method
into the blob the device loads. One entry, :func:`prepare_model` (with :func:`load_data`,
the run's data set at the model's resolution)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hilbench import data as datasets
from hilbench.config import RunConfig, parse_eps_mult
from hilbench.data import pretrained
from hilbench.errors import ConfigError
from hilbench.npu import nets, pretrain, zoo
from hilbench.npu.blob import to_blob
from hilbench.npu.graph import Graph
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables

CALIBRATION_ITEMS = 256
PRETRAIN_DATASET = "digits"  # --init pretrained: float pre-training on the clean digits
POOL_SEED_SALT = 0x504F4F4C  # "POOL": the pool seed is the run seed xor this
# A random-init MLP's int8 weights use +-64 of int8's +-127 (each row's largest weight at 64
# LSBs), so training can grow them 2x: at the full range no weight can outgrow its init
# maximum (docs/results.md). Pre-trained weights keep the full range. The CNN's converter
# (npu/convert.py) has no such setting yet.
RANDOM_INIT_WEIGHT_RANGE = 64


@dataclass(frozen=True)
class PreparedModel:
    graph: Graph
    blob: bytes
    input_scale: float
    input_zero_point: int
    zo: zocf.ZoConfig
    trained: list[zocf.Trainable]

    def fresh_words(self, q: int) -> int:
        """PRNG words the device draws in a step of q samples (PROBE + APPLY)."""
        return zocf.fresh_words_per_step(self.zo, self.trained, q)

    def fresh_numbers(self, q: int) -> int:
        """Random numbers the device draws in a step of q samples (PROBE + APPLY)."""
        return zocf.fresh_numbers_per_step(self.zo, self.trained, q)


_PRETRAINED: dict[tuple[str, int], list] = {}


def pretrained_float_weights(model: str, seed: int) -> list:
    """Float weights of ``model`` pre-trained on the clean digits (cached per process)."""
    key = (model, seed)
    if key not in _PRETRAINED:
        clean = datasets.load(PRETRAIN_DATASET)
        _PRETRAINED[key] = pretrain.pretrain(model, clean.x_train, clean.y_train, seed=seed)
    return _PRETRAINED[key]


VISION_DEFAULTS = {"mobilenet_v2": ("alpha", 0.35), "resnet18": ("width", 0.25)}


def arch_kwargs(config: RunConfig) -> dict:
    """The architecture's size for a vision model (alpha or width, resolution), else {}."""
    if config.model not in VISION_DEFAULTS:
        return {}
    key, default = VISION_DEFAULTS[config.model]
    return {key: config.width or default, "resolution": data_resolution(config)}


def data_resolution(config: RunConfig) -> int | None:
    """The side images are resized to (vision models), None for the digits' models."""
    if config.model not in VISION_DEFAULTS:
        return None
    return config.resolution or datasets.VISION_RESOLUTION


def load_data(config: RunConfig) -> datasets.Dataset:
    """The run's data set, at the vision model's resolution when it is an image data set."""
    res = data_resolution(config) if datasets.is_image_dataset(config.dataset) else None
    return datasets.load(config.dataset, res)


def build_graph(config: RunConfig, data: datasets.Dataset) -> Graph:
    """The int8 model: random init calibrated on the run's data, or (``init=pretrained``)
    pre-trained in float on the clean digits and quantized with clean calibration data (a
    vision model: on the Fashion-MNIST source task, hilbench.data.pretrained)."""
    arch = arch_kwargs(config)
    if arch:
        arch["classes"] = data.n_classes
        if config.init == "pretrained":
            weights, source = pretrained.vision_weights(config.model, arch)
            return zoo.build(
                config.model,
                seed=config.seed,
                calibration=source.x_train[:CALIBRATION_ITEMS],
                float_weights=weights,
                **arch,
            )
        return zoo.build(
            config.model, seed=config.seed, calibration=data.x_train[:CALIBRATION_ITEMS], **arch
        )
    if config.init == "pretrained":
        clean = datasets.load(PRETRAIN_DATASET)
        return zoo.build(
            config.model,
            seed=config.seed,
            calibration=clean.x_train[:CALIBRATION_ITEMS],
            float_weights=pretrained_float_weights(config.model, config.seed),
        )
    kw = {"weight_range": RANDOM_INIT_WEIGHT_RANGE} if config.model == "mlp" else {}
    return zoo.build(
        config.model, seed=config.seed, calibration=data.x_train[:CALIBRATION_ITEMS], **kw
    )


def zo_config(config: RunConfig, graph: Graph) -> zocf.ZoConfig:
    """The ZOCF section ``config`` asks for; ConfigError naming the setting otherwise."""
    try:
        zo = zocf.build(
            graph,
            layers=config.layers,
            distribution=config.perturbation,
            scaling=None if config.scaling == "auto" else config.scaling,
            estimator=config.estimator,
            rounding=config.rounding,
            master=config.master,
            pool_size=config.pool,
            pool_seed=(config.seed ^ POOL_SEED_SALT) & 0xFFFFFFFF,
            eps_mults=parse_eps_mult(config.eps_mult),
            per_channel=config.eps_per_channel,
        )
    except ValueError as exc:
        raise ConfigError(
            f"{config.model}: {exc}",
            "pick --layers / --pool / --eps-mult that fit the model (see docs/zo-math.md)",
        ) from None
    return without_head(config, graph, zo) if config.hybrid == "last" else zo


def head_tensors(graph: Graph) -> tuple[str, str | None]:
    """The hybrid's head: the filter and bias of the last op, a FULLY_CONNECTED producing the
    output (ConfigError otherwise)."""
    op = graph.ops[-1] if graph.ops else None
    if op is None or op.kind != "FULLY_CONNECTED" or op.outputs[0] != graph.output:
        raise ConfigError(
            "--hybrid last needs a model whose last op is a FULLY_CONNECTED layer",
            "train this model by ZO only (--hybrid none)",
        )
    return op.inputs[1], op.inputs[2] if len(op.inputs) > 2 else None


def without_head(config: RunConfig, graph: Graph, zo: zocf.ZoConfig) -> zocf.ZoConfig:
    """``zo`` with the head's tensors left out: the exact gradient trains them."""
    names = list(graph.tensors)
    head = set(head_tensors(graph))
    entries = zo.tensors or zocf.default_entries(graph)
    kept = tuple(e for e in entries if names[e.index] not in head)
    if not kept:
        raise ConfigError(
            f"--layers {config.layers} selects only the last layer, which --hybrid last trains "
            "by its exact gradient: nothing is left for ZO",
            "select layers before the last one too (e.g. --layers weights)",
        )
    return zo.replace(tensors=kept)


def check_model_fits(config: RunConfig, data: datasets.Dataset) -> None:
    """A ConfigError saying what to do when ``config.model`` cannot take ``data``'s items
    (e.g. ResNet18's 64x64 colour images against the digits' 8x8 grey ones)."""
    if config.model not in nets.ARCHITECTURES:
        return  # zoo.build names the known models
    if config.model in VISION_DEFAULTS and not datasets.is_image_dataset(config.dataset):
        items = "x".join(map(str, data.input_shape))
        raise ConfigError(
            f"model {config.model} takes colour images and the items of {config.dataset} are "
            f"{items} grey values",
            "train it on an image data set: --dataset fashion-mnist-shift (or fashion-mnist, "
            "eurosat:DIR, stl10:DIR)",
        )
    if config.model in VISION_DEFAULTS:
        return  # the images are resized to the model's resolution
    if datasets.is_image_dataset(config.dataset):
        raise ConfigError(
            f"model {config.model} takes the digits' 8x8 values, not the colour images of "
            f"{config.dataset}",
            f"train mobilenet_v2 or resnet18 on {config.dataset} (--model mobilenet_v2)",
        )
    size = int(np.prod(data.input_shape))

    def takes(name: str) -> tuple[int, ...]:
        return tuple(nets.float_model(name, 0).input_shape)

    shape = takes(config.model)
    if int(np.prod(shape)) == size:
        return
    fits = [n for n in nets.ARCHITECTURES if int(np.prod(takes(n))) == size]
    items = "x".join(map(str, data.input_shape))
    fix = f"train {' or '.join(fits)} (--model {fits[0]})" if fits else "choose another --model"
    raise ConfigError(
        f"model {config.model} takes {'x'.join(map(str, shape))} images and the items of "
        f"{config.dataset} are {items} values: hilbench ships no data set {config.model} can "
        "train on yet",
        f"{fix}; {config.model}'s inference speed is measured by benchmarks/bench_npu.py",
    )


def prepare_model(config: RunConfig, data: datasets.Dataset) -> PreparedModel:
    """Build and quantize the model, and pack it with its loss tables and ZOCF section."""
    check_model_fits(config, data)
    graph = build_graph(config, data)
    out = graph.tensors[graph.output]
    tables = LossTables.for_scale(float(out.qparams.scale[0]))
    zo = zo_config(config, graph)
    blob = to_blob(graph, {"LOSS": tables.to_bytes(), "ZOCF": zo.to_bytes()})
    inp = graph.tensors[graph.input].qparams
    return PreparedModel(
        graph, blob, float(inp.scale[0]), int(inp.zero_point[0]), zo, zocf.resolve(zo, graph)
    )
