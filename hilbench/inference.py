"""int8 inference of a graph on a device through a backend (``hilbench infer``,
``hilbench validate``): upload the model and the inputs, read back the outputs."""

from __future__ import annotations

import contextlib

import numpy as np

from hilbench.errors import ModelError

CHUNK = 256  # samples per emulator call: bounds memory on large inputs


class NullBar(contextlib.AbstractContextManager):
    """No progress shown: a subscriber factory that ignores every transfer."""

    def __exit__(self, *exc) -> None:
        return None

    def to(self, what: str):
        return lambda event: None


def infer_on_device(
    graph,
    x: np.ndarray,
    backend: str,
    *,
    port: str | None = None,
    firmware: str | None = None,
    bar=None,
) -> np.ndarray:
    """Outputs (N, *output_shape) int8 of ``graph`` on ``x`` as a device computes them."""
    from hilbench.backend.registry import make_backend
    from hilbench.config import RunConfig
    from hilbench.npu.blob import to_blob
    from hilbench.protocol import data_blob, spec
    from hilbench.zo import zocf
    from hilbench.zo.loss import LossTables

    # a device loads a model with its loss tables and ZO method; inference uses neither, so
    # the defaults with the int8 master (no master copy) keep its memory at inference's
    out = graph.tensors[graph.output]
    tables = LossTables.for_scale(float(out.qparams.scale[0]))
    blob = to_blob(
        graph, {"LOSS": tables.to_bytes(), "ZOCF": zocf.ZoConfig(master="int8").to_bytes()}
    )
    classes = int(np.prod(graph.output_shape))
    if classes > 0xFFFF:
        raise ModelError(
            f"the model has {classes} outputs; a device's data slot names at most 65535 classes",
            "run this model on the emulator (leave out --sil/--qemu/--board)",
        )
    flat = x.reshape(len(x), -1)
    config = RunConfig(backend=backend, port=port, firmware=firmware, live=False)
    ys = []
    device = make_backend(config)
    bar = bar if bar is not None else NullBar()  # the caller's progress bar, or none
    device.events.load.subscribe(bar.to("loading the firmware"))  # a board's firmware, if any
    with bar, device as target:
        model = target.events.upload.subscribe(bar.to("uploading the model"))
        target.load_model(blob)
        target.events.upload.unsubscribe(model)
        target.events.upload.subscribe(bar.to("uploading the inputs"))
        item = flat.shape[1]
        per_slot = max(1, min(CHUNK, (spec.DEFAULT_ARENA_BYTES // 4) // (item + 1)))
        for start in range(0, len(flat), per_slot):
            part = flat[start : start + per_slot]
            labels = np.zeros(len(part), np.uint8)
            target.load_data_blob(0, data_blob.encode(part, labels, classes))
            for i in range(len(part)):
                ys.append(np.asarray(target.infer(slot=0, index=i).output, np.int8))
    if not ys:
        return np.zeros((0, *graph.output_shape), np.int8)
    return np.stack(ys).reshape(len(ys), *graph.output_shape)
