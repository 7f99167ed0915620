"""Issue 29 on MobileNetV2: the QScheduler with its rate coupled to q (``couple=1``) against
the current rule, fine-tuning the head at 6,000 forward passes (zo_study_vision's ``mbv2-ft``
at its ``LONG_BUDGET``), from the rate tuned for q = 1 (300) and from 3x it, seed by seed.

    OPENBLAS_NUM_THREADS=1 nice -n 19 python benchmarks/zo_study_issue29_vision.py [--seeds 0,1,2]

Runs land in traces/zo_study/ beside the other studies' (cached by their keys); the table is
printed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import zo_study as zs
import zo_study_vision as zv

ROWS = (
    ("fixed q=1, own tuned lr (the best fixed q at 6,000 in results-vision.md)", "fixed:1", 300.0),
    ("QScheduler (current rule), lr tuned for q=1", "qscheduler", 300.0),
    ("QScheduler, rate follows q (couple=1), lr tuned for q=1", "qscheduler:couple=1", 300.0),
    ("QScheduler (current rule), lr 3× too large", "qscheduler", 900.0),
    ("QScheduler, rate follows q (couple=1), lr 3× too large", "qscheduler:couple=1", 900.0),
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    specs = [
        zv.spec("mbv2-ft", sched, lr, seed, "i29v", budget=zv.LONG_BUDGET)
        for seed in seeds
        for _, sched, lr in ROWS
    ]
    zv.run_all(specs, 1)
    print("| configuration | lr | final test accuracy % | seeds | q path (first seed) |")
    print("| --- | --- | --- | --- | --- |")
    for label, sched, lr in ROWS:
        outs = [
            zs.load_outcome(zv.spec("mbv2-ft", sched, lr, s, budget=zv.LONG_BUDGET)) for s in seeds
        ]
        outs = [o for o in outs if o is not None]
        if not outs:
            continue
        acc = [o.final_accuracy for o in outs]
        path = ", ".join(f"q={q} from {fp:,}" for fp, q in outs[0].q_changes)
        print(
            f"| {label} | {lr:g} | {zs._fmt(acc)} | "
            + ", ".join(f"{100 * a:.1f}" for a in acc)
            + f" | {path} |"
        )
        print(
            f"<!-- {label}: CRCs {[hex(o.weights_crc) for o in outs]}, "
            f"train loss {np.mean([o.final_train_loss for o in outs]):.3f} -->"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
