"""benchmarks/zo_study_widened.py: the held-out test items no run sees, the held-out accuracy
of a real (short) run equal to its replayed weights' on those items, and the plan of a tier
(rates tuned per budget, five seeds apart from the tuning seed). Run in a subprocess, as
tests/train/test_vision_study.py does: importing the study registers its tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from hilbench.data import fashion
from tests.cli_helpers import ROOT


def test_the_held_out_items_are_the_test_files_others():
    ix = fashion.indices()
    held, test = ix["target_heldout"], ix["target_test"]
    assert len(held) == 10_000 - fashion.TARGET_TEST
    assert not set(held) & set(test)
    assert sorted(set(held) | set(test)) == list(range(10_000))


RUN = """
import json, sys
sys.path.insert(0, "benchmarks")
import numpy as np
import zo_study_widened as w
from hilbench import session
from hilbench.data import quantize_inputs
from hilbench.data.vision import fashion_heldout
from hilbench.trace import Trace
from hilbench.trace.replay import replay_state
s = w.spec("mbv2-ft", "fixed:1", 300.0, 7, 60)
o = w.run_one(s)
cfg = s.config()
state = replay_state(Trace.open(cfg.trace))
x, y = fashion_heldout(cfg.dataset, 24)
p = session.prepare_model(cfg, session.load_data(cfg))
xq = quantize_inputs(x, p.input_scale, p.input_zero_point)
before = p.graph.run(xq[:512]).reshape(512, -1).argmax(1)
after = state.graph.run(xq).reshape(len(y), -1).argmax(1)
lrs = {1: 50.0, 2: 93.3, 4: 174.0, 8: 325.0}
rows = w.rows(lrs)
print(json.dumps({
    "extra": o.extra, "replayed": float(np.mean(after == y)), "n": int(len(y)),
    "changed": int(np.sum(before != after[:512])), "crc": o.weights_crc,
    "rows": [[label, sc, lr] for label, sc, lr in rows],
    "seeds": list(w.SEEDS), "tune_seed": w.zs.TUNE_SEED, "budgets": w.BUDGETS,
}))
"""


def test_a_short_run_is_scored_on_the_held_out_items_by_its_final_weights(tmp_path):
    env = {**os.environ, "ZO_STUDY_OUT": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", RUN], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["extra"]["heldout_items"] == got["n"] == 9_488
    # the twin's final model and the trace's replay give the same predictions on every item
    assert got["extra"]["heldout_accuracy"] == got["replayed"]
    assert 0.2 < got["replayed"] < 1.0
    assert got["changed"] > 0  # 30 steps moved the head: some prediction changed
    # the plan: the four fixed q at their own rates; the QScheduler from the q=1 rate and 3x it
    rows = {(sc, lr) for _, sc, lr in got["rows"]}
    assert {(f"fixed:{q}", lr) for q, lr in ((1, 50.0), (2, 93.3), (4, 174.0), (8, 325.0))} <= rows
    assert {("qscheduler", 50.0), ("qscheduler", 150.0)} <= rows
    assert {("qscheduler:couple=1", 50.0), ("qscheduler:couple=1", 150.0)} <= rows
    assert got["seeds"] == [0, 1, 2, 3, 4] and got["tune_seed"] not in got["seeds"]
    budgets = got["budgets"]
    assert budgets["mlp-scratch"] == [60_000, 120_000, 240_000]
    assert budgets["mlp-ft"] == [20_000, 40_000]
    assert budgets["mbv2-ft"] == budgets["r18-ft"] == [3_000, 6_000, 12_000]
    assert np.isfinite(got["crc"])
