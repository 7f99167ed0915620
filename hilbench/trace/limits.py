"""Declarative limits on a trace, in the spirit of OpenHTF measurements.

    from hilbench.trace.limits import Limit, check

    check(trace,
          Limit("final_accuracy", low=0.90, marginal_low=0.92, units="fraction"),
          Limit("timing.APPLY_PROBE.p99@modeled", high=5e-3, units="s"),  # a step's PROBE
          Limit("events.retry", high=0, units="count"))

A value outside [low, high] fails; inside the limits but outside [marginal_low, marginal_high]
passes with a MarginalWarning. ``check`` evaluates every limit, then raises one
``LimitFailure`` (an AssertionError) listing each failure with the measured value, the limit
and the trace path. Measurements are named (see ``measure``) or computed by a callable.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hilbench.errors import HilbenchError
from hilbench.trace.reader import Trace

PASS, MARGINAL, FAIL = "PASS", "MARGINAL", "FAIL"

#: Named measurements and their units; parameterised ones are listed in ``measure``.
UNITS = {
    "final_accuracy": "fraction",
    "final_loss": "nats",
    "train_loss": "nats",
    "forward_passes": "count",
    "steps": "count",
}


class LimitError(HilbenchError):
    """A limit that cannot be evaluated: unknown measurement, wrong units, bad bounds."""


class LimitFailure(AssertionError):
    """One or more limits failed; the message lists each one."""

    def __init__(self, message: str, results: list[LimitResult]) -> None:
        super().__init__(message)
        self.results = results


class MarginalWarning(UserWarning):
    """A measurement passed, but inside its marginal band."""


@dataclass(frozen=True)
class Limit:
    """Bounds on one measurement of a run. ``units`` must match the measurement's (if given);
    ``marginal_low``/``marginal_high`` narrow the band inside which a pass is not marginal."""

    measurement: str
    low: float | None = None
    high: float | None = None
    units: str = ""
    marginal_low: float | None = None
    marginal_high: float | None = None
    description: str = ""
    measure: Callable[[Trace], float | None] | None = None  # overrides the named measurement

    def __post_init__(self) -> None:
        bounds = (self.low, self.high, self.marginal_low, self.marginal_high)
        if all(b is None for b in bounds):
            raise LimitError(
                f"limit on {self.measurement!r} has no bound",
                "give low and/or high (and optionally marginal_low/marginal_high)",
            )
        for name, b in zip(("low", "high", "marginal_low", "marginal_high"), bounds, strict=True):
            if b is not None and (not isinstance(b, int | float) or math.isnan(b)):
                raise LimitError(
                    f"{name} = {b!r} of limit {self.measurement!r} is not a number",
                    "give numbers in the measurement's units",
                )
        order = [
            b for b in (self.low, self.marginal_low, self.marginal_high, self.high) if b is not None
        ]
        if order != sorted(order):
            raise LimitError(
                f"limit on {self.measurement!r} has bounds out of order ({self.describe()})",
                "use low <= marginal_low <= marginal_high <= high",
            )

    def __repr__(self) -> str:
        """Like the call that makes it, with only the arguments given."""
        args = [repr(self.measurement)]
        for name in ("low", "high", "units", "marginal_low", "marginal_high", "description"):
            value = getattr(self, name)
            if value not in (None, ""):
                args.append(f"{name}={value!r}")
        if self.measure is not None:
            args.append(
                f"measure={getattr(self.measure, '__qualname__', type(self.measure).__name__)}"
            )
        return f"Limit({', '.join(args)})"

    def describe(self) -> str:
        """The limit as text, e.g. '0.9 <= x <= 1 fraction (marginal below 0.92)'."""
        u = f" {self.units}" if self.units else ""
        if self.low is not None and self.high is not None:
            text = f"{self.low:g} <= x <= {self.high:g}{u}"
        elif self.low is not None:
            text = f"x >= {self.low:g}{u}"
        elif self.high is not None:
            text = f"x <= {self.high:g}{u}"
        else:
            text = f"any{u}"
        marg = []
        if self.marginal_low is not None:
            marg.append(f"below {self.marginal_low:g}")
        if self.marginal_high is not None:
            marg.append(f"above {self.marginal_high:g}")
        return text + (f" (marginal {' or '.join(marg)})" if marg else "")

    def judge(self, value: float | None) -> str:
        if value is None or not isinstance(value, int | float) or math.isnan(value):
            return FAIL
        if (self.low is not None and value < self.low) or (
            self.high is not None and value > self.high
        ):
            return FAIL
        if (self.marginal_low is not None and value < self.marginal_low) or (
            self.marginal_high is not None and value > self.marginal_high
        ):
            return MARGINAL
        return PASS


@dataclass(frozen=True)
class LimitResult:
    limit: Limit
    value: float | None
    units: str
    outcome: str  # PASS, MARGINAL or FAIL
    trace_path: Path
    run_id: str

    @property
    def passed(self) -> bool:
        return self.outcome != FAIL

    def __repr__(self) -> str:
        return f"<LimitResult {self}>"

    def __str__(self) -> str:
        shown = "not measured" if self.value is None else f"{self.value:.6g}"
        u = f" {self.units}" if self.units and self.value is not None else ""
        return (
            f"{self.outcome}: {self.limit.measurement} = {shown}{u}, limit {self.limit.describe()}"
            f" (trace {self.trace_path}, run {self.run_id})"
        )

    def properties(self) -> list[tuple[str, object]]:
        """JUnit properties: hilbench.limit.<name> = outcome, .value, .limit."""
        key = f"hilbench.limit.{self.limit.measurement}"
        return [
            (key, self.outcome),
            (f"{key}.value", "" if self.value is None else self.value),
            (f"{key}.limit", self.limit.describe()),
        ]


def measure(trace: Trace, name: str) -> tuple[float | None, str]:
    """The value of a named measurement and its units. Names:

    - ``final_accuracy`` (fraction), ``final_loss`` (nats, last test evaluation),
      ``train_loss`` (nats, mean step loss of the last steps), ``forward_passes``, ``steps``
    - ``accuracy@N`` (fraction): the last test evaluation at or before N forward passes
    - ``timing.COMMAND.STAT@SOURCE`` (s): STAT is a percentile (p50, p99, p99.9: any pNN
      from 0 to 100), mean, min or max; SOURCE is
      device, modeled or host (may be left out when the command has one source only); with
      SOURCE instr (QEMU -icount) the value is a count of executed instructions;
      ``modeled:MODEL`` (``modeled:m55``, ``modeled:npu``) also requires the trace's modeled
      durations to come from that cost model (its ``timing_model`` attribute), else the
      measurement is an error naming the model the trace used
    - ``events.KIND`` (count): events of that kind (retry, resync, reset, fault, ...)
    """
    final = trace.final
    if name in UNITS:
        value = {
            "final_accuracy": final.accuracy,
            "final_loss": final.loss,
            "train_loss": final.train_loss,
            "forward_passes": final.forward_passes,
            "steps": final.steps,
        }[name]
        return value, UNITS[name]
    if name.startswith("accuracy@"):
        try:
            n = int(name.partition("@")[2].replace("_", ""))
        except ValueError:
            raise LimitError(
                f"measurement {name!r} needs a whole number of forward passes",
                "write e.g. accuracy@10000",
            ) from None
        return trace.accuracy_at(n), "fraction"
    if name.startswith("events."):
        return trace.event_counts().get(name.partition(".")[2], 0), "count"
    if name.startswith("timing."):
        value, source = _timing(trace, name)
        return value, "instructions" if source == "instr" else "s"
    raise LimitError(
        f"unknown measurement {name!r}",
        f"use one of {', '.join(UNITS)}, accuracy@N, timing.COMMAND.STAT@SOURCE, events.KIND, "
        "or pass measure=callable",
    )


def _timing(trace: Trace, name: str) -> tuple[float | None, str]:
    """The value of a timing measurement and the source that measured it."""
    spec, _, source = name.partition("@")
    source, _, model = source.partition(":")
    if model:
        _check_timing_model(trace, name, source, model)
    parts = spec.split(".", 2)  # the statistic may have a dot: p99.9
    if len(parts) != 3 or not parts[1]:
        raise LimitError(
            f"measurement {name!r} is not timing.COMMAND.STAT[@SOURCE]",
            "write e.g. timing.PROBE.p99@device",
        )
    _, command, stat = parts
    if stat.startswith("p") and _is_number(stat[1:]) and 0 <= float(stat[1:]) <= 100:
        pct = float(stat[1:])
        table, key = trace.timing_percentiles((pct,)), f"p{pct:g}"
    elif stat in ("mean", "min", "max"):
        table, key = trace.timing_percentiles(()), stat
    else:
        raise LimitError(
            f"unknown timing statistic {stat!r} in {name!r}",
            "use p50, p90, p99 or any pNN from 0 to 100 (p99.9), mean, min or max",
        )
    sources = [src for cmd, src in table if cmd == command]
    if not sources:
        return None, source  # not measured: the limit fails and says so
    if not source:
        if len(sources) > 1:
            raise LimitError(
                f"{command} was timed by {', '.join(sources)}: {name!r} does not say which",
                f"write e.g. {spec}@{sources[0]} (durations of different sources are not pooled)",
            )
        source = sources[0]
    if source not in sources:
        return None, source
    return float(table[(command, source)][key]), source


def _check_timing_model(trace: Trace, name: str, source: str, model: str) -> None:
    """A limit on ``modeled:MODEL`` time holds only on a trace modeled by MODEL."""
    if source != "modeled":
        raise LimitError(
            f"{name!r} names a timing model for source {source!r}",
            "only modeled durations have one: write e.g. timing.PROBE.p99@modeled:m55",
        )
    used = str(trace.attrs.get("timing_model", "") or "")
    if used.partition("@")[0] != model:
        said = f"modeled by {used}" if used else "not named with its timing model (an old trace)"
        raise LimitError(
            f"{name!r} limits {model} time, but the trace's modeled durations are {said}",
            "write the limit for the trace's model, or rerun with --timing-model " + model,
        )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def evaluate(trace: Trace, limit: Limit) -> LimitResult:
    """Measure and judge one limit (no warning, no exception for a failure)."""
    if limit.measure is not None:
        value, units = limit.measure(trace), limit.units
    else:
        value, units = measure(trace, limit.measurement)
        if limit.units and limit.units != units:
            raise LimitError(
                f"limit on {limit.measurement!r} is in {limit.units!r} but the measurement is "
                f"in {units!r}",
                f"give the bounds in {units}",
            )
    if value is not None:
        value = float(value)
        if math.isnan(value):
            value = None
    return LimitResult(limit, value, units, limit.judge(value), trace.path, trace.run_id)


def check(
    trace: Trace | str | Path,
    *limits: Limit,
    record: Callable[[str, object], None] | None = None,
    stacklevel: int = 2,
) -> list[LimitResult]:
    """Judge every limit; warn for marginal passes; raise one LimitFailure listing every
    failure. ``record(name, value)`` receives JUnit-style properties for each result;
    ``stacklevel`` is the marginal warning's (2: the caller of check)."""
    __tracebackhide__ = True  # pytest shows the failure at the caller's line
    if not isinstance(trace, Trace):
        trace = Trace.open(trace)
    results = [evaluate(trace, limit) for limit in limits]
    for r in results:
        if record is not None:
            for key, value in r.properties():
                record(key, value)
        if r.outcome == MARGINAL:
            warnings.warn(str(r), MarginalWarning, stacklevel=stacklevel)
    failed = [r for r in results if r.outcome == FAIL]
    if failed:
        head = (
            f"{len(failed)} of {len(results)} limits failed" if len(results) > 1 else "limit failed"
        )
        raise LimitFailure(head + ":\n" + "\n".join(f"  {r}" for r in failed), results)
    return results
