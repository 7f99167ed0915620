"""``hilbench infer MODEL.tflite --input X.npy [--output Y.npy] [--sil | --qemu | --board PORT]``:
run an int8 .tflite model on the bit-exact emulator (TFLM reference semantics), or on a device.

On a device (the SIL firmware, QEMU, a board) the model goes up as a model blob and each input
goes down in INFER requests (in pieces when larger than a frame); each output comes back in
INFER answers (in parts when larger than a frame): the bytes the device computed, to compare
with TFLM's byte for byte. With ``--labels y.npy`` the top-1 accuracy is printed.

X holds N int8 inputs stacked on a leading axis, each of the model's input shape without its
batch axis or with batch 1; Y gets the N int8 outputs stacked the same way. Without
``--output`` the outputs are printed, one sample a line.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np

from hilbench.cli.export import describe_quant
from hilbench.cli.output import add_force, check_output, write_atomic
from hilbench.errors import HilbenchError, ModelError
from hilbench.inference import infer_on_device

CHUNK = 256  # samples per emulator call: bounds memory on large inputs


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("infer", help="run an int8 .tflite model on the emulator")
    p.add_argument("model", type=Path, help="int8 .tflite model")
    p.add_argument("--input", "-i", type=Path, required=True, help="X.npy: N stacked int8 inputs")
    p.add_argument("--output", "-o", type=Path, help="Y.npy for the N int8 outputs")
    p.add_argument("--labels", type=Path, help="y.npy: a label per input; prints the accuracy")
    add_force(p)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--emulate", action="store_true", help="the emulator, in-process (default)")
    where.add_argument("--sil", action="store_true", help="the C firmware built for this host")
    where.add_argument("--qemu", action="store_true", help="the firmware under qemu-system-arm")
    where.add_argument("--board", metavar="PORT", help="a board or socket:// URL (pyserial)")
    p.add_argument("--fw", metavar="PATH", help="with --sil / --qemu: the firmware to run")
    p.set_defaults(handler=handle)


def load_inputs(
    path: Path, in_shape: tuple[int, ...], quant: tuple[float, int] | None = None
) -> tuple[np.ndarray, bool]:
    """(x of shape (N, *in_shape), whether X carried a batch-1 axis); HilbenchError if X
    is not an int8 array of shape (N, *in_shape) or (N, 1, *in_shape). ``quant``: the input's
    (scale, zero point), named in the error for float inputs."""
    want = ", ".join(map(str, in_shape))
    expected = f"int8 of shape (N, {want}) or (N, 1, {want})"
    try:
        x = np.load(path, allow_pickle=False)
    except OSError as e:
        raise HilbenchError(f"cannot read {path}: {e.strerror or e}", "check the path") from None
    except (ValueError, EOFError) as e:  # EOFError: an empty file
        reason = str(e) or type(e).__name__
        raise HilbenchError(f"{path} is not a .npy array ({reason})", f"save {expected}") from None
    if not isinstance(x, np.ndarray):
        raise HilbenchError(f"{path} holds several arrays", f"save one array, {expected}")
    if x.dtype != np.int8:
        how = "quantize the inputs to int8 with the model's input scale"
        if quant is not None:
            scale, zero = quant
            how = (
                f"quantize them: q = clip(round(x / {scale:.9g}) {'-' if zero < 0 else '+'} "
                f"{abs(zero)}, -128, 127) (the model's input scale and zero point)"
            )
        raise ModelError(f"{path} holds {x.dtype} {x.shape}, expected {expected}", how)
    if x.ndim == len(in_shape) + 1 and x.shape[1:] == in_shape:
        return x, False
    if x.ndim == len(in_shape) + 2 and x.shape[1] == 1 and x.shape[2:] == in_shape:
        return x[:, 0], True
    raise ModelError(
        f"{path} has shape {x.shape}, expected {expected}", "stack the inputs on a leading axis"
    )


def handle(args: argparse.Namespace) -> int:
    from hilbench.npu.tflite import load_tflite

    if args.fw is not None and not (args.sil or args.qemu):
        raise HilbenchError(
            "--fw names the firmware --sil or --qemu runs; "
            + ("a board" if args.board else "the emulator")
            + " runs none, so it would be ignored",
            "leave out --fw, or add --sil or --qemu",
        )
    out = args.output
    if out is not None:
        check_output(
            out, [args.model, args.input, args.fw, args.labels], force=args.force, example="Y.npy"
        )
    graph = load_tflite(args.model)
    q = graph.tensors[graph.input].qparams
    quant = (float(q.scale[0]), int(q.zero_point[0])) if q is not None else None
    x, batch_axis = load_inputs(args.input, graph.input_shape, quant)
    labels = None
    if args.labels is not None:
        from hilbench.validate import load_labels

        labels = load_labels(args.labels, len(x))
    backend = (
        "qemu" if args.qemu else "sil" if args.sil else "board" if args.board is not None else None
    )
    if backend is None:
        parts = [graph.run(x[i : i + CHUNK]) for i in range(0, len(x), CHUNK)]
        y = np.concatenate(parts) if parts else np.zeros((0, *graph.output_shape), np.int8)
    else:
        from hilbench.cli.progress import TransferBar  # on stderr: stdout is the outputs

        y = infer_on_device(graph, x, backend, port=args.board, firmware=args.fw, bar=TransferBar())
    if batch_axis:
        y = y[:, None]
    # how to make this model's inputs and read its outputs, on stderr: stdout is the outputs
    print(describe_quant(graph, graph.input, "input "), file=sys.stderr)
    print(describe_quant(graph, graph.output, "output"), file=sys.stderr)
    if labels is not None:  # on stdout with -o, else on stderr: stdout is then the outputs
        from hilbench.validate import label_accuracy

        acc = label_accuracy(y, labels)
        hits = round(acc * len(y))
        line = f"accuracy against {args.labels.name}: {hits}/{len(y)} = {acc:.4f} (top-1)"
        print(line, file=sys.stdout if out is not None else sys.stderr)
    if out is not None:
        buf = io.BytesIO()
        np.save(buf, y)
        write_atomic(out, buf.getvalue())
        print(f"{len(y)} outputs of shape {y.shape[1:]} (int8) -> {out}")
        return 0
    for row in y.reshape(len(y), -1):
        sys.stdout.write(" ".join(map(str, row.tolist())) + "\n")
    return 0
