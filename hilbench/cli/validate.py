"""``hilbench validate MODEL.tflite [--emulate | --sil | --qemu | --board PORT] [--input X.npy |
--data NAME [--split test]] [--labels y.npy] [--json] [--layers] [--rmse R --mae M --l2r L
--cos C --acc A]``:
a device against TFLM item by item — byte-equal outputs, ST's metrics (ACC, RMSE, MAE, L2R,
COS), accuracy with labels, the worst items. Exit 0 when every output is byte-equal (or, given
tolerances, within them), 1 otherwise. The logic is :mod:`hilbench.validate`."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from hilbench.errors import HilbenchError

TOLERANCES = ("rmse", "mae", "l2r", "cos", "acc")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="a device against TFLM on inputs or a data set")
    _arguments(p)
    p.set_defaults(handler=handle)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", type=Path, help="an int8 .tflite model")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--emulate", action="store_true", help="the emulator (default)")
    where.add_argument("--sil", action="store_true", help="the C firmware built for this host")
    where.add_argument("--qemu", action="store_true", help="the firmware under qemu-system-arm")
    where.add_argument("--board", metavar="PORT", help="a board or socket:// URL")
    p.add_argument("--fw", metavar="PATH", help="with --sil / --qemu: the firmware to run")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", "-i", type=Path, help="X.npy: N stacked int8 inputs")
    src.add_argument("--data", metavar="NAME", help="a data set, quantized for the model")
    p.add_argument("--split", default="test", help="with --data: train or test (default test)")
    p.add_argument("--items", type=int, help="only the first N items")
    p.add_argument("--labels", type=Path, help="y.npy: a label per item (accuracy)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--layers", action="store_true", help="also compare every layer (the emulator's) with TFLM"
    )
    for name in TOLERANCES:
        bound = "at least" if name in ("cos", "acc") else "at most"
        p.add_argument(f"--{name}", type=float, help=f"tolerance: {name.upper()} {bound} this")


def handle(args: argparse.Namespace) -> int:
    from hilbench.cli.infer import load_inputs
    from hilbench.npu.tflite import import_tflite
    from hilbench.validate import compare_layers, format_layers, format_text, validate

    try:
        model = args.model.read_bytes()
    except OSError as e:
        raise HilbenchError(f"cannot read {args.model}: {e.strerror}", "check the path") from None
    graph = import_tflite(model, str(args.model))
    labels = None
    if args.data:
        from hilbench.data.export import quantized_split

        s = quantized_split(args.data, args.split, graph)
        x, labels = s.x, s.y
    else:
        q = graph.tensors[graph.input].qparams
        x, _ = load_inputs(args.input, graph.input_shape, (float(q.scale[0]), int(q.zero_point[0])))
    if args.labels is not None:
        from hilbench.validate import load_labels

        labels = load_labels(args.labels, len(x))
    if args.items is not None:
        x = x[: args.items]
        labels = None if labels is None else labels[: args.items]
    backend = "qemu" if args.qemu else "sil" if args.sil else "board" if args.board else "emulate"
    r = validate(
        model, x, backend=backend, labels=labels, port=args.board, fw=args.fw, name=str(args.model)
    )
    tol = {k: getattr(args, k) for k in TOLERANCES if getattr(args, k) is not None}
    ok = r.within(tol)
    layers = compare_layers(graph, x) if args.layers else None
    if args.json:
        d = {**r.to_dict(), "tolerances": tol, "passed": ok}
        if layers is not None:
            d["layers"] = [asdict(x) for x in layers]
        json.dump(d, sys.stdout, indent=1)
        print()
    else:
        print(format_text(r))
        if tol:
            print(f"  tolerances {tol}: {'met' if ok else 'NOT met'}")
        if layers is not None:
            print(format_layers(layers))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    """``hilbench validate`` on its own (before it is wired into the CLI)."""
    from hilbench.cli import Parser

    p = Parser(prog="hilbench validate", description=__doc__.splitlines()[0])
    _arguments(p)
    args = p.parse_args(argv)
    try:
        return handle(args)
    except HilbenchError as exc:
        print(f"hilbench: error: {exc}", file=sys.stderr)
        return 2
