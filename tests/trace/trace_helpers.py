"""Helpers for the trace tests: run attributes, a small known run, a script runner."""

from __future__ import annotations

from pathlib import Path

from hilbench.trace import TraceWriter

RUN_ATTRS = {
    "protocol_version": 1,
    "backend": "emulate",
    "device_id": "twin-0",
    "firmware": "hilbench-twin 0.1.0",
    "model": "mlp-64",
    "model_hash": "sha256:0f1e2d",
    "dataset": "digits",
    "seed": 1234,
    "git_revision": "abc1234",
}
CONFIG = {"q": [2, 3, 1], "lr": 0.001, "eps": 1, "schedule": {"kind": "fixed"}}

# Three steps with variable q (2, 3, 1) and extreme values in every integer column.
STEPS = [
    dict(
        step=0,
        q=2,
        seeds=[0, 0xFFFFFFFF],
        loss_plus=[-(2**31), 2**31 - 1],
        loss_minus=[65536, -65536],
        grads=[0.25, -1.5],
        coeffs=[3, -3],
        lr=1e-3,
        eps=1,
        batch_seed=0xFFFFFFFF,
        loss=1.75,
        forward_passes=4,
        fresh_words=10,
        fresh_numbers=2**63 - 1,
    ),
    dict(
        step=1,
        q=3,
        seeds=[11, 12, 13],
        loss_plus=[100, 200, 300],
        loss_minus=[101, 199, 305],
        grads=[-0.5, 0.5, -2.5],
        coeffs=[1, -1, 5],
        lr=5e-4,
        eps=2,
        batch_seed=7,
        loss=1.5,
        forward_passes=10,
        fresh_words=25,
        fresh_numbers=800,
    ),
    dict(
        step=2,
        q=1,
        seeds=[99],
        loss_plus=[42],
        loss_minus=[40],
        grads=[1.0],
        coeffs=[-2],
        lr=2.5e-4,
        eps=1,
        batch_seed=8,
        loss=1.25,
        forward_passes=12,
        fresh_words=30,  # no fresh_numbers: the writer records -1 (not recorded)
    ),
]


def write_known_run(path: Path, *, finish: bool = True, **create_kw: object) -> TraceWriter:
    """Write STEPS plus evals, timing and events; return the (closed if finish) writer."""
    w = TraceWriter.create(path, RUN_ATTRS, CONFIG, **create_kw)
    for s in STEPS:
        w.append_step(**s)
    w.append_eval(1, 10, 0.5, 1.4, split="train")
    w.append_eval(2, 12, 0.625, 1.3)
    w.append_timing(0, "PROBE", 0.010, "device")
    w.append_timing(0, "APPLY", 0.002, "modeled")
    w.append_timing(1, "EVAL", 0.5, "host")
    w.append_event(1, "retry", "timeout after 200 ms — résumé")
    if finish:
        w.finish("complete", weights_crc=0xDEADBEEF)
        w.close()
    return w
