"""Where two runs of the same test on two backends part: the first step whose seeds, losses
or update differ, the first evaluation that differs, or the final weights CRC.

Every backend is the same device (invariant 1): a run of one configuration gives the same
numbers on the twin, the SIL, QEMU and a board. ``first_parting(a, b)`` says where two traces
stop agreeing (None when they agree everywhere); ``compare_runs({backend: trace})`` holds
every run against the first. ``pytest --backends`` uses both for the runs of each test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from hilbench.trace.reader import Trace

#: Step columns compared (what the device computed and what the host decided from it).
STEP_FIELDS = ("q", "batch_seed", "eps", "loss", "forward_passes")
SAMPLE_FIELDS = ("seed", "loss_plus", "loss_minus", "coeff")


@dataclass(frozen=True)
class Parting:
    """Where run ``b`` parts from run ``a``: ``step`` (None: not in a step), what differs."""

    a: str  # a label of each run (its backend)
    b: str
    step: int | None
    what: str

    def __str__(self) -> str:
        where = f"at step {self.step}" if self.step is not None else "at the end"
        return f"{self.b} parts from {self.a} {where}: {self.what}"


def _label(trace: Trace) -> str:
    return str(trace.attrs.get("backend") or "?")


def _value(x: object) -> str:
    if isinstance(x, float | np.floating):
        return f"{float(x):.6g}"
    return str(x)


def _timed_out(trace: Trace) -> bool:
    return str(trace.attrs.get("stop_reason", "")).startswith("time limit")


def first_parting(a: Trace, b: Trace, *, labels: tuple[str, str] | None = None) -> Parting | None:
    """The first place run ``b`` differs from run ``a``, or None if they agree. When a time
    limit ended either run (each backend is as fast as it is), only the steps both took are
    compared."""
    la, lb = labels or (_label(a), _label(b))
    sa, sb = a.steps, b.steps
    prefix_only = _timed_out(a) or _timed_out(b)
    for i in range(min(len(sa), len(sb))):
        for name in STEP_FIELDS:
            if sa[name][i] != sb[name][i]:
                return Parting(
                    la,
                    lb,
                    int(sa["step"][i]),
                    f"{name} {_value(sa[name][i])} vs {_value(sb[name][i])}",
                )
        xa, xb = a.step_samples(i), b.step_samples(i)
        for name in SAMPLE_FIELDS:
            if not np.array_equal(xa[name], xb[name]):
                k = int(np.argmax(xa[name] != xb[name])) if len(xa) == len(xb) else 0
                return Parting(
                    la,
                    lb,
                    int(sa["step"][i]),
                    f"{name}[{k}] {_value(xa[name][k])} vs {_value(xb[name][k])}",
                )
    if prefix_only:
        return None
    if len(sa) != len(sb):
        return Parting(la, lb, min(len(sa), len(sb)), f"{len(sa):,} steps vs {len(sb):,}")
    ea, eb = a.evals, b.evals
    for i in range(min(len(ea), len(eb))):
        for name in ("forward_passes", "accuracy", "loss"):
            if ea[name][i] != eb[name][i]:
                return Parting(
                    la,
                    lb,
                    int(ea["step"][i]),
                    f"evaluation after {int(ea['forward_passes'][i]):,} forward passes: "
                    f"{name} {_value(ea[name][i])} vs {_value(eb[name][i])}",
                )
    if len(ea) != len(eb):
        return Parting(la, lb, None, f"{len(ea)} evaluations vs {len(eb)}")
    ca, cb = a.weights_crc, b.weights_crc
    if ca != cb:
        return Parting(la, lb, None, f"weights CRC {_crc(ca)} vs {_crc(cb)}")
    return None


def _crc(crc: int | None) -> str:
    return "unknown" if crc is None else f"0x{crc:08x}"


def compare_runs(runs: Mapping[str, Trace]) -> list[Parting]:
    """Every run held against the first (by label, e.g. backend): the partings found."""
    items = list(runs.items())
    if len(items) < 2:
        return []
    (first_label, first), rest = items[0], items[1:]
    found = []
    for label, trace in rest:
        parting = first_parting(first, trace, labels=(first_label, label))
        if parting is not None:
            found.append(parting)
    return found


def agreement_line(runs: Mapping[str, Trace]) -> str:
    """One line for runs that agree: ``same on emulate, sil: 1,125 steps, CRC 0x667f2d01``."""
    first = next(iter(runs.values()))
    return (
        f"same on {', '.join(runs)}: {first.n_steps:,} steps, weights CRC {_crc(first.weights_crc)}"
    )
