"""``hilbench analyze MODEL.tflite | --model NAME [--width W --resolution R --classes N]
[--json]``: what a model costs on the STM32N6 — per layer and total MACs, parameters and
activations, the device RAM of inference and of a ZO step (per master and perturbation), its
flash, whether it fits the N6 port's on-chip arena or needs the PSRAM, and the modeled latency
of one forward pass on the Cortex-M55 the firmware runs on and on the Neural-ART (a
projection), each labelled. The logic is :mod:`hilbench.analysis`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from hilbench.config import width_arg
from hilbench.errors import HilbenchError

VISION_SIZE = {"mobilenet_v2": "alpha", "resnet18": "width"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="MACs, memory, fit and modeled latency of a model")
    _arguments(p)
    p.set_defaults(handler=handle)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("tflite", nargs="?", type=Path, help="an int8 .tflite model")
    p.add_argument("--model", metavar="NAME", help="a zoo model: mlp, cnn, mobilenet_v2, resnet18")
    p.add_argument("--width", type=width_arg, help="MobileNetV2's alpha or ResNet18's width")
    p.add_argument("--resolution", type=int, help="a vision model's image side")
    p.add_argument("--classes", type=int, help="a vision model's number of classes")
    p.add_argument("--json", action="store_true", help="print the analysis as JSON")


def build_graph(args: argparse.Namespace):
    """The graph the arguments name, and its display name."""
    if (args.tflite is None) == (args.model is None):
        raise HilbenchError(
            "analyze needs one model", "give MODEL.tflite or --model NAME (not both)"
        )
    if args.tflite is not None:
        if args.width or args.resolution or args.classes:
            raise HilbenchError(
                "--width, --resolution and --classes size a zoo model",
                "leave them out for a .tflite file",
            )
        from hilbench.npu.tflite import load_tflite

        return load_tflite(args.tflite), args.tflite.name
    from hilbench.npu import zoo

    name = args.model
    kw: dict = {}
    if name in VISION_SIZE:
        if args.width:
            kw[VISION_SIZE[name]] = args.width
        if args.resolution:
            kw["resolution"] = args.resolution
        if args.classes:
            kw["classes"] = args.classes
        r = args.resolution or (96 if name == "mobilenet_v2" else 64)
        kw["calibration"] = np.random.default_rng(0).random((2, r, r, 3), dtype=np.float32)
    elif args.width or args.resolution or args.classes:
        raise HilbenchError(
            f"--width, --resolution and --classes size a vision model; {name} has none",
            f"leave them out, or analyze one of {', '.join(VISION_SIZE)}",
        )
    try:
        g = zoo.build(name, seed=0, **kw)
    except (ValueError, TypeError) as exc:
        raise HilbenchError(f"cannot build {name}: {exc}", "check the size options") from None
    size = ", ".join(f"{k} {v}" for k, v in kw.items() if k != "calibration")
    return g, f"{name}" + (f" ({size})" if size else "")


def handle(args: argparse.Namespace) -> int:
    from hilbench import analysis

    graph, name = build_graph(args)
    result = analysis.analyze(graph, name)
    if args.json:
        json.dump(result.to_dict(), sys.stdout, indent=1)
        print()
    else:
        print(analysis.format_text(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``hilbench analyze`` on its own (before it is wired into the CLI)."""
    from hilbench.cli import Parser

    p = Parser(prog="hilbench analyze", description=__doc__.splitlines()[0])
    _arguments(p)
    args = p.parse_args(argv)
    try:
        return handle(args)
    except HilbenchError as exc:
        print(f"hilbench: error: {exc}", file=sys.stderr)
        return 2
