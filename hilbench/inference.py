"""int8 inference of a graph on a device through a backend (``hilbench infer``,
``hilbench validate``): upload the model and the inputs, read back the outputs."""

from __future__ import annotations

import contextlib

import numpy as np


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
    from hilbench.client.events import Transfer
    from hilbench.config import RunConfig
    from hilbench.npu.blob import to_blob
    from hilbench.zo import zocf
    from hilbench.zo.loss import LossTables

    # a device loads a model with its loss tables and ZO method; inference uses neither, so
    # the defaults with the int8 master (no master copy) keep its memory at inference's
    out = graph.tensors[graph.output]
    tables = LossTables.for_scale(float(out.qparams.scale[0]))
    blob = to_blob(
        graph, {"LOSS": tables.to_bytes(), "ZOCF": zocf.ZoConfig(master="int8").to_bytes()}
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
        # each input travels in the INFER requests themselves (in pieces when it is larger
        # than a frame) and each output comes back in parts: no data slot, so no limit of
        # the data blob's 16-bit item size and class count (docs/protocol.md, INFER)
        progress = bar.to("uploading the inputs")  # in bytes, as the bar counts them
        total = int(flat.nbytes)
        for i, row in enumerate(flat):
            progress(Transfer(i * row.nbytes, total))
            ys.append(np.asarray(target.infer(input=row.tobytes()).output, np.int8))
        progress(Transfer(total, total))
    if not ys:
        return np.zeros((0, *graph.output_shape), np.int8)
    return np.stack(ys).reshape(len(ys), *graph.output_shape)
