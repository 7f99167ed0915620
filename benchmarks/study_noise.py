"""The noise beside a study's gap: the seeds' paired spread and the test set's binomial error.

A gap between two configurations is the mean over seeds of their paired differences (same seed,
same data order, same test items); its noise is that mean's standard error. A single run's
accuracy on n test items also carries a binomial standard error, sqrt(p (1 - p) / n), which no
number of seeds removes from a comparison made on the same n items.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any


def paired_gap(
    rows: Sequence[Any], against: Sequence[Any], value: Callable[[Any], float]
) -> tuple[float, float, int]:
    """(mean, standard error, seeds) of ``value(row) - value(against)`` in points, pairing runs
    by their spec's seed; only seeds both have count (the s.e. is nan below two pairs)."""
    base = {o.spec.seed: value(o) for o in against}
    diffs = [100.0 * (value(o) - base[o.spec.seed]) for o in rows if o.spec.seed in base]
    if not diffs:
        return math.nan, math.nan, 0
    mean = sum(diffs) / len(diffs)
    if len(diffs) < 2:
        return mean, math.nan, len(diffs)
    var = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
    return mean, math.sqrt(var / len(diffs)), len(diffs)


def binomial_se(accuracy: float, items: int) -> float:
    """One run's binomial standard error, in points, of an accuracy measured on ``items``."""
    return 100.0 * math.sqrt(max(accuracy * (1.0 - accuracy), 0.0) / items)


def gap_text(mean: float, se: float) -> str:
    """``+0.8 ± 0.4``: a gap in points and its paired standard error."""
    return f"{mean:+.1f} ± {se:.1f}" if math.isfinite(se) else f"{mean:+.1f}"


def noise_note(seeds: int, items: int, accuracy: float) -> str:
    """The sentence a verdict carries: what the ± is, and one run's binomial error."""
    return (
        f"± the s.e. of {seeds} seeds' paired differences; one run's binomial s.e. on "
        f"{items:,} test items ≈ {binomial_se(accuracy, items):.1f}"
    )


def verdict(gap: float, bound: float) -> str:
    """``met`` when the mean gap is at least ``-bound`` points, else by how much it missed (to
    the hundredth when a tenth would read as on the line)."""
    if gap >= -bound:
        return "met"
    short = -gap - bound
    return f"missed by {short:.2f}" if short < 0.05 else f"missed by {short:.1f}"
