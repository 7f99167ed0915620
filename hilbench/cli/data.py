"""``hilbench data export NAME --split test --model-file M.tflite -o DIR``: a data set's split
as the model's device sees it — ``x.npy`` (int8, quantized with the model's input scale and
zero point, as ``hilbench run`` does), ``y.npy`` (labels) and ``meta.json`` — ready for
``hilbench infer`` / ``hilbench validate``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hilbench.errors import HilbenchError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="export a data set's split quantized for a model")
    _arguments(p)
    p.set_defaults(handler=handle)


def _arguments(p: argparse.ArgumentParser) -> None:
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    e = verbs.add_parser("export", help="write x.npy (int8) and y.npy of a split")
    e.add_argument("name", help="data set: digits, digits-rotN, fashion, eurosat:DIR, ...")
    e.add_argument("--split", default="test", help="train or test (default test)")
    e.add_argument("--model-file", type=Path, required=True, help="the int8 .tflite to feed")
    e.add_argument("-o", "--output", type=Path, required=True, help="directory to write")


def handle(args: argparse.Namespace) -> int:
    from hilbench.data.export import quantized_split, write_split
    from hilbench.npu.tflite import load_tflite

    graph = load_tflite(args.model_file)
    s = quantized_split(args.name, args.split, graph)
    meta = {"dataset": args.name, "split": args.split, "model": str(args.model_file)}
    paths = write_split(s, args.output, meta)
    print(
        f"{args.name} {args.split}: {len(s.y)} items, x int8 {tuple(s.x.shape)} (scale "
        f"{s.scale:.9g}, zero point {s.zero_point}), y {tuple(s.y.shape)} -> "
        + ", ".join(str(p) for p in paths)
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """``hilbench data`` on its own (before it is wired into the CLI)."""
    from hilbench.cli import Parser

    p = Parser(prog="hilbench data", description=__doc__.splitlines()[0])
    _arguments(p)
    args = p.parse_args(argv)
    try:
        return handle(args)
    except HilbenchError as exc:
        print(f"hilbench: error: {exc}", file=sys.stderr)
        return 2
