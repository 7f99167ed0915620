"""Would a regulariser in the exact head close the MLP hybrid's gap to backprop? (issue 29)

A twin-only experiment: HEAD_GRAD's math (hilbench.zo.head, which the twin runs) patched in
this process with a weight decay (each step also removes ``decay`` of every head weight,
stochastically rounded like the gradient's step) or label smoothing (the target of the
softmax error is (1 - s) one-hot + s / M). Neither is in the protocol or the firmware: a
result here decides whether one should be. The run is the follow-up study's hybrid of the
first layer's weights and biases (MLP from scratch, 60,000 passes, fixed q = 1, ZO lr 50,
head lr 5,600), one seed per call; it prints one JSON line.

    OPENBLAS_NUM_THREADS=1 python benchmarks/head_regularisers.py --seed 0 --smooth 0.1
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from hilbench import session
from hilbench.config import RunConfig
from hilbench.console import PlainView
from hilbench.device import BANNER_REASONS, DeviceTwin
from hilbench.zo import head

RUN = dict(model="mlp", dataset="digits", init="random", scheduler="fixed:1", budget=60_000)
HYBRID = dict(lr=50.0, layers="all", hybrid="last", head_lr=5600.0)  # the follow-up's tuned


def patch(decay: float, smooth: float) -> None:
    """Put the regularisers into hilbench.zo.head for this process."""
    update, softmax_error = head.update, head.softmax_error

    def decayed(w, b, g, bsum, rates, bias_gain, round_seed):
        if decay:  # d w in the gradient's units: (d w r) >> 39 = decay w
            r = np.maximum(np.asarray(rates, dtype=np.int64), 1)
            d = np.rint(decay * float(1 << head.SHIFT) / r).astype(np.int64)
            g = g.astype(np.int64) + d[:, None] * w.astype(np.int64)
        return update(w, b, g, bsum, rates, bias_gain, round_seed)

    def smoothed(logits, labels, tables):
        e = softmax_error(logits, labels, tables)
        if smooth:
            m = e.shape[1]
            share = np.int64(round(smooth * (1 << head.GRAD_FRAC)))  # s in Q15
            e = e + (share * (np.eye(m, dtype=np.int64)[labels] - 1 / m)).astype(np.int64)
        return e

    head.update, head.softmax_error = decayed, smoothed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--decay", type=float, default=0.0, help="share of a weight removed a step")
    ap.add_argument("--smooth", type=float, default=0.0, help="label smoothing s")
    a = ap.parse_args(argv)
    patch(a.decay, a.smooth)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = RunConfig(trace=Path(tmp) / "t.h5", seed=a.seed, **RUN, **HYBRID)
        result = session.run(
            cfg,
            target=session.direct_target(DeviceTwin(**BANNER_REASONS)),
            view=PlainView(write=lambda line: None),
        )
    out = {"seed": a.seed, "decay": a.decay, "smooth": a.smooth}
    print(json.dumps({**out, "accuracy": round(float(result.final_accuracy), 4)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
