"""``hilbench quantize FLOAT.tflite (--data NAME | --calibration X.npy) -o OUT.tflite``: a float32
.tflite of the ops hilbench runs, quantized to int8 by hilbench's own quantizer (per-channel
weights, activation ranges from the calibration inputs: a data set's train split or float
inputs in an .npy). :mod:`hilbench.npu.quantize_tflite` holds the logic."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from hilbench.cli.output import add_force, check_output, write_atomic
from hilbench.errors import HilbenchError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quantize", help="quantize a float .tflite to int8")
    _arguments(p)
    p.set_defaults(handler=handle)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", type=Path, help="a float32 .tflite")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="NAME", help="calibrate on this data set's train split")
    src.add_argument("--calibration", type=Path, metavar="X.npy", help="float inputs (N, ...)")
    p.add_argument("--items", type=int, default=256, help="calibration items (default 256)")
    p.add_argument("-o", "--output", type=Path, required=True, help="the int8 .tflite to write")
    add_force(p)


def calibration(args: argparse.Namespace, input_shape: tuple[int, ...]) -> np.ndarray:
    if args.data:
        from hilbench import data as datasets

        res = input_shape[0] if datasets.is_image_dataset(args.data) else None
        return datasets.load(args.data, res).x_train[: args.items]
    try:
        x = np.load(args.calibration, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise HilbenchError(
            f"cannot read {args.calibration}: {e}", "save float inputs with numpy.save"
        ) from None
    if not np.issubdtype(x.dtype, np.floating):
        raise HilbenchError(
            f"{args.calibration} holds {x.dtype}", "calibrate on float inputs, as the model takes"
        )
    return x[: args.items]


def handle(args: argparse.Namespace) -> int:
    from hilbench.npu.quantize_tflite import import_float_tflite, quantize_float_tflite
    from hilbench.npu.tflite import export_tflite

    check_output(
        args.output, [args.model, args.calibration], force=args.force, example="int8.tflite"
    )
    try:
        data = args.model.read_bytes()
    except OSError as e:
        raise HilbenchError(f"cannot read {args.model}: {e.strerror}", "check the path") from None
    fm = import_float_tflite(data, str(args.model))
    g = quantize_float_tflite(data, calibration(args, fm.input_shape), str(args.model))
    write_atomic(args.output, export_tflite(g))
    q = g.tensors[g.input].qparams
    print(
        f"{args.model} -> {args.output}: {len(g.ops)} ops int8, input scale "
        f"{float(q.scale[0]):.9g} zero point {int(q.zero_point[0])}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """``hilbench quantize`` on its own (before it is wired into the CLI)."""
    from hilbench.cli import Parser

    p = Parser(prog="hilbench quantize", description=__doc__.splitlines()[0])
    _arguments(p)
    args = p.parse_args(argv)
    try:
        return handle(args)
    except HilbenchError as exc:
        print(f"hilbench: error: {exc}", file=sys.stderr)
        return 2
