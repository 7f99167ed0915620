"""``hilbench export TRACE -o trained.tflite [--run ID] [--batch N]``: the trained int8 model.

The trace holds the model the device started from and every update it applied; replaying them
(invariant 2) rebuilds the device's final weights, checked against the weights CRC the device
reported. They are written as an int8 .tflite model (the tflite-micro schema) that TFLM runs
and ``hilbench infer`` reads. Before the file is written, the model read back from its own
bytes is run on the run's test set: its accuracy must be the one the device measured.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from hilbench.cli.output import add_force, check_output, write_atomic


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a run's trained int8 model as a .tflite file (TFLM runs it)",
        description="Rebuild the weights a run trained from its trace (checked against the "
        "device's weights CRC) and write them as an int8 .tflite model that TFLite for "
        "Microcontrollers runs and `hilbench infer` reads.",
    )
    p.add_argument("trace", type=Path, help="the run's HDF5 trace")
    p.add_argument("--output", "-o", type=Path, required=True, help="the .tflite file to write")
    p.add_argument("--run", metavar="ID", help="run id (default: the last run in the file)")
    add_force(p)
    p.add_argument(
        "--batch",
        type=int,
        default=1,
        metavar="N",
        help="the batch size fixed in the model's shapes (default 1, what TFLM runs)",
    )
    p.set_defaults(handler=handle)


def describe_quant(graph: Any, name: str, what: str) -> str:
    """``input int8 (8, 8, 1): scale 0.00392157, zero point -128`` for a graph tensor."""
    t = graph.tensors[name]
    q = t.qparams
    shape = ", ".join(map(str, t.shape))
    if q is None:
        return f"{what} {t.dtype} ({shape})"
    if q.scale.size == 1:
        return (
            f"{what} {t.dtype} ({shape}): scale {float(q.scale[0]):.9g}, "
            f"zero point {int(q.zero_point[0])}"
        )
    return f"{what} {t.dtype} ({shape}): {q.scale.size} per-channel scales"


def handle(args: argparse.Namespace) -> int:
    from hilbench import data as datasets
    from hilbench.errors import HilbenchError, TraceError
    from hilbench.npu.tflite import export_tflite, import_tflite
    from hilbench.trace import Trace
    from hilbench.trace.replay import replay_state

    out: Path = args.output
    check_output(out, [args.trace], force=args.force, example="trained.tflite")
    trace = Trace.open(args.trace, args.run)
    from hilbench import session

    state = replay_state(trace, head_data=session.head_data(trace))
    where = f"{args.trace} run {trace.run_id}"
    crc = state.weights_crc()
    if trace.weights_crc is not None and crc != trace.weights_crc:
        raise TraceError(
            f"{where} does not replay to the device's weights (CRC 0x{crc:08x}, the device "
            f"reported 0x{trace.weights_crc:08x}), so its trained model cannot be rebuilt",
            f"run `hilbench replay {args.trace}` for details; export another run",
        )
    recorded_head = trace.attrs.get("head_crc")
    if recorded_head is not None and state.head_crc() != int(recorded_head) & 0xFFFFFFFF:
        raise TraceError(
            f"{where} does not replay to the device's head (CRC 0x{state.head_crc():08x}, the "
            f"device reported 0x{int(recorded_head) & 0xFFFFFFFF:08x}), so its trained model "
            "cannot be rebuilt",
            f"run `hilbench replay {args.trace}` for details; export another run",
        )
    graph = state.graph
    model = trace.attrs.get("model", graph.name)
    dataset = trace.attrs.get("dataset", "?")
    description = (
        f"hilbench {model} trained on {dataset} by zeroth-order steps: {args.trace.name} run "
        f"{trace.run_id}, {state.updates_applied} updates, weights CRC-32 0x{crc:08x}"
    )
    data = export_tflite(graph, args.batch, description)

    # The file as a reader sees it: imported back and run on the run's test set.
    check = import_tflite(data, str(out))
    accuracy = None
    if dataset in datasets.DATASETS:
        d = datasets.load(dataset)
        q = check.tensors[check.input].qparams
        x = datasets.quantize_inputs(d.x_test, float(q.scale[0]), int(q.zero_point[0]))
        logits = check.run(x.reshape(len(x), *check.input_shape))
        accuracy = float(np.mean(logits.reshape(len(x), -1).argmax(-1) == d.y_test))
        tests = trace.evals[trace.evals["split"] == "test"]
        fp = trace.forward_passes
        measured = tests[tests["forward_passes"] == fp]["accuracy"]
        if len(measured) and abs(float(measured[-1]) - accuracy) > 1e-12:
            raise HilbenchError(
                f"the exported model scores {accuracy:.2%} on {dataset}'s test set, the device "
                f"measured {float(measured[-1]):.2%} with the same weights",
                "this is a bug in the export: please report it with the trace",
            )

    write_atomic(out, data)

    if trace.status != "complete":
        print(
            f"hilbench: note: run {trace.run_id} is {trace.status}: these are its weights "
            f"after {state.updates_applied:,} updates ({trace.forward_passes:,} forward "
            "passes), not a finished run's",
            file=sys.stderr,
        )
    acc = "" if accuracy is None else f"; test accuracy {accuracy:.2%}"
    print(
        f"wrote {out} ({len(data):,} bytes): {model} from {where}, {state.updates_applied:,} "
        f"updates, weights CRC 0x{crc:08x}"
        + (" as the device reported" if trace.weights_crc is not None else "")
        + acc
    )
    print(describe_quant(check, check.input, "input "))
    print(describe_quant(check, check.output, "output"))
    return 0
