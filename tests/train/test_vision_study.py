"""benchmarks/zo_study_vision.py plans the study issue 18 asks for: per network, fixed q in
{1, 2, 4, 8, 16} at its own tuned rate, the QScheduler from the q = 1 rate and from 3x it,
fixed q = 1 at 3x, on 3 evaluation seeds apart from the tuning seed, equal budgets, head only.
Run in a subprocess: importing the study registers its tasks in zo_study."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.cli_helpers import ROOT

LRS = {
    "mbv2-ft": {1: 300.0, 2: 560.0, 4: 1040.0, 8: 1940.0, 16: 3640.0},
    "r18-ft": {1: 100.0, 2: 187.0, 4: 348.0, 8: 650.0, 16: 1210.0},
}
PLAN = """
import json, sys
sys.path.insert(0, "benchmarks")
import zo_study_vision as v
lrs = LRS
specs = v.main_specs(list(v.TASKS.values()), lrs)
tune = v.zs.lr_grid(v.TASKS["mbv2-ft"], 4)
print(json.dumps({
    "specs": [[s.task, s.scheduler, s.lr, s.seed, s.layers, s.run_budget] for s in specs],
    "commands": [s.command() for s in specs[:1]],
    "configs": [[c.model, c.dataset, c.init, c.layers, c.budget] for c in
                (s.config() for s in specs)],
    "tune_seed": v.zs.TUNE_SEED, "qs": list(v.zs.QS), "tune_grid": tune,
}))
"""


def test_the_study_plan(tmp_path):
    env = {**os.environ, "ZO_STUDY_OUT": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", f"LRS = {LRS!r}\n{PLAN}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    specs = plan["specs"]
    assert plan["qs"] == [1, 2, 4, 8, 16]
    assert len(specs) == 2 * 8 * 3
    assert {s[3] for s in specs} == {0, 1, 2} and plan["tune_seed"] not in {0, 1, 2}
    assert {s[4] for s in specs} == {"last:1"} and {s[5] for s in specs} == {3000}
    for task, lr1, lr3 in (("mbv2-ft", 300.0, 900.0), ("r18-ft", 100.0, 300.0)):
        mine = {(s[1], s[2]) for s in specs if s[0] == task}
        own = {(f"fixed:{q}", float(lr)) for q, lr in LRS[task].items()}
        assert mine == own | {("qscheduler", lr1), ("fixed:1", lr3), ("qscheduler", lr3)}
    assert {tuple(c) for c in plan["configs"]} == {
        ("mobilenet_v2", "fashion-mnist-shift", "pretrained", "last:1", 3000),
        ("resnet18", "fashion-mnist-shift", "pretrained", "last:1", 3000),
    }
    assert "--layers last:1" in plan["commands"][0]
    assert plan["tune_grid"] == [522.0, 1040.0, 2090.0]  # (0.5, 1, 2) x 300 x 4^0.9, 3 digits


MEMORY = """
import json, sys
sys.path.insert(0, "benchmarks")
import zo_study_vision as v
print(json.dumps(v.step_memory(v.TASKS["mbv2-ft"])))
"""


def test_the_reports_memory_of_a_step_against_inference_and_backprop(tmp_path):
    """The report's memory table (docs/results-vision.md): the core built for the M55, the
    firmware's layout. It once printed an AttributeError into the table instead."""
    env = {**os.environ, "ZO_STUDY_OUT": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout.strip().splitlines()[-1])
    assert m["trained_head"] == 1280 * 10 + 10  # MobileNetV2's classifier: 1,280 -> 10, bias
    assert m["trained_all"] > 30 * m["trained_head"]
    inf = m["inference"]
    assert m["blob"] + m["act"] < inf < m["sram"]
    assert inf < m["zo_head"] < 1.15 * inf  # the head's q16 masters and rows beside inference
    assert inf < m["zo_all_int8"] < 1.05 * inf  # no master: the row buffer only
    assert m["zo_all"] > m["zo_all_int8"] + 2 * m["trained_all"]  # q16 masters: 4 B a weight
    assert m["bp_all"] > m["zo_all_int8"] + 4 * m["trained_all"]  # a 4-byte gradient a weight
