"""Run configuration: one validated dataclass shared by the CLI, the pytest plugin and tests."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilbench.errors import ConfigError

BACKENDS = ("emulate", "qemu", "board")


@dataclass(frozen=True)
class RunConfig:
    """Everything that decides what a run does; stored whole in the trace."""

    backend: str = "emulate"
    port: str | None = None  # pyserial URL for the board backend
    model: str = "mlp"
    dataset: str = "digits"
    scheduler: str = "fixed:4"
    budget: int = 30_000  # forward passes (one forward of one perturbed model on one batch)
    seed: int = 0
    lr: float = 1000.0  # weight LSBs moved per (nat per LSB) of projected gradient
    eps: int = 2  # perturbation size in weight LSBs
    batch_size: int = 32
    eval_every: int = 2_000  # forward passes between test evaluations
    trace: Path | None = None
    live: bool = True
    link_faults: str = ""  # fault injection spec, e.g. "drop=0.01,reset=0.001,seed=1"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend '{self.backend}'", f"use one of {BACKENDS}")
        if self.backend == "board" and not self.port:
            raise ConfigError("the board backend needs a port", "pass --board PORT")
        _check_range("budget", self.budget, 2, 10**9)
        _check_range("seed", self.seed, 0, 2**32 - 1)
        _check_range("eps", self.eps, 1, 127)
        _check_range("batch_size", self.batch_size, 1, 256)
        _check_range("eval_every", self.eval_every, 1, 10**9)
        if not (0.0 < self.lr <= 1e6):
            raise ConfigError(f"learning rate {self.lr} is out of range", "use 0 < lr <= 1e6")
        parse_scheduler(self.scheduler)
        if self.link_faults:
            from hilbench.link.faults import FaultSpec

            FaultSpec.parse(self.link_faults)

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["trace"] = str(self.trace) if self.trace else None
        return d


def _check_range(name: str, value: int, lo: int, hi: int) -> None:
    if not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f"{name} {value!r} is out of range", f"use an integer in [{lo}, {hi}]")


def parse_scheduler(spec: str) -> tuple[str, int]:
    """``fixed:Q`` -> ("fixed", Q). Later issues add adaptive schedulers."""
    kind, _, arg = spec.partition(":")
    if kind == "fixed":
        try:
            q = int(arg)
        except ValueError:
            q = -1
        if not 1 <= q <= 256:
            raise ConfigError(f"scheduler '{spec}' needs q in [1, 256]", "write e.g. fixed:4")
        return kind, q
    raise ConfigError(f"unknown scheduler '{spec}'", "use fixed:Q, e.g. fixed:4")
