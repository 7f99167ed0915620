"""The ZO study's cache keys: unchanged for existing configurations (outcomes are cached by key),
distinct for the budget variants, and evaluations on every intermediate target."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import zo_study as z


def test_existing_keys_are_stable():
    assert z.Spec("mlp-scratch", "fixed:2", 93.3, 0).key == "mlp-scratch-fixed2-lr93.3-s0-b60000"
    spec = z.Spec("cnn-ft", "fixed:4", 87.1, 1, "uniform", 256, lr_schedule="step:0.5@0.75")
    assert spec.key == "cnn-ft-fixed4-lr87.1-s1-uniform-pool256-lrs_step:0.5@0.75-b12000"


def test_budget_variant_spec():
    spec = z.Spec("mlp-scratch", "fixed:32", 1130.0, 0, budget=15_000, estimator="one-sided")
    assert spec.key == "mlp-scratch-fixed32-lr1130-s0-onesided-b15000"
    cfg = spec.config()
    assert (cfg.budget, cfg.estimator, cfg.eval_every) == (15_000, "one-sided", 500)
    assert spec.command().endswith("--budget 15000 --seed 0 --estimator one-sided")


def test_evaluations_land_on_targets():
    every = {name: z.eval_every(t, t.budget) for name, t in z.TASKS.items()}
    assert every == {"mlp-scratch": 1000, "cnn-scratch": 1000, "mlp-ft": 666, "cnn-ft": 400}
    for t in z.TASKS.values():
        assert all(fp % z.eval_every(t, t.budget) == 0 for fp, _ in t.targets if fp < t.budget)
