"""benchmarks/study_noise.py: the paired standard error of a study's gap and a run's binomial
error, against scipy's paired t statistic and binomial distribution."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import study_noise as n


def _runs(accs: dict[int, float]) -> list[SimpleNamespace]:
    return [SimpleNamespace(spec=SimpleNamespace(seed=s), acc=a) for s, a in accs.items()]


def test_the_paired_gap_and_its_error_match_scipys_paired_t():
    rng = np.random.default_rng(7)
    base = rng.uniform(0.85, 0.95, 5)
    other = base + rng.normal(-0.01, 0.008, 5)
    a = _runs(dict(enumerate(other)))
    b = _runs(dict(enumerate(base)))
    mean, se, seeds = n.paired_gap(a, b, lambda o: o.acc)
    t = stats.ttest_rel(100 * other, 100 * base).statistic
    assert seeds == 5
    assert math.isclose(mean, 100 * float(np.mean(other - base)), rel_tol=1e-12)
    assert math.isclose(mean / se, t, rel_tol=1e-9)


def test_runs_pair_by_seed_not_by_position_and_unpaired_seeds_drop_out():
    a = _runs({2: 0.90, 0: 0.80, 9: 0.50})
    b = _runs({0: 0.70, 1: 0.99, 2: 0.85})
    mean, se, seeds = n.paired_gap(a, b, lambda o: o.acc)
    assert seeds == 2
    assert math.isclose(mean, 100 * ((0.90 - 0.85) + (0.80 - 0.70)) / 2)
    assert math.isclose(se, 100 * abs(0.10 - 0.05) / 2)  # two pairs: s.e. = |d1 - d2| / 2
    one = n.paired_gap(_runs({0: 0.8}), b, lambda o: o.acc)
    assert one[2] == 1 and math.isnan(one[1])
    assert n.gap_text(one[0], one[1]) == f"{one[0]:+.1f}"
    assert n.paired_gap(_runs({5: 0.8}), b, lambda o: o.acc)[2] == 0


def test_the_binomial_error_is_the_binomial_distributions():
    for p, items in ((0.93, 359), (0.5, 512), (0.8, 9_488)):
        expect = 100 * stats.binom(items, p).std() / items
        assert math.isclose(n.binomial_se(p, items), expect, rel_tol=1e-12)
    note = n.noise_note(3, 359, 0.93)
    assert "3 seeds" in note and "359 test items" in note
    assert f"{n.binomial_se(0.93, 359):.1f}" in note


def test_a_verdict_says_by_how_much_a_target_was_missed_without_reading_as_on_the_line():
    assert n.verdict(-0.99, 1.0) == "met" and n.verdict(0.5, 0.0) == "met"
    assert n.verdict(-1.04, 1.0) == "missed by 0.04"  # not "missed by 0.0" beside "-1.0"
    assert n.verdict(-3.4, 2.0) == "missed by 1.4"
