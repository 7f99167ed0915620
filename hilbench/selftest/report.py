"""The selftest's record: each check passes, fails or does not apply, with its figures and, when
it fails, what to try. Written as JSON (attach it to a bug report) and as a readable summary."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "n/a"
FORMAT = "hilbench-selftest/1"


@dataclass
class Check:
    name: str
    status: str  # PASS, FAIL or NOT_APPLICABLE
    detail: str  # what was measured, or why it does not apply
    fix: str = ""  # what to try when it failed
    figures: dict[str, object] = field(default_factory=dict)


@dataclass
class Report:
    backend: str
    where: str
    hilbench_version: str
    checks: list[Check] = field(default_factory=list)
    hello: dict[str, object] = field(default_factory=dict)
    device_info: dict[str, object] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, check: Check) -> Check:
        self.checks.append(check)
        return check

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    def to_dict(self) -> dict[str, object]:
        out = {"format": FORMAT, **asdict(self)}
        out["result"] = FAIL if self.failed else PASS
        return out

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")

    def summary(self) -> str:
        width = max(len(c.name) for c in self.checks) if self.checks else 8
        lines = [f"hilbench selftest: {self.backend} ({self.where}), {self.seconds:.1f} s"]
        for c in self.checks:
            lines.append(f"  {c.status.upper():4}  {c.name:<{width}}  {c.detail}")
            if c.status == FAIL and c.fix:
                lines.append(f"        {'':<{width}}  try: {c.fix}")
        counts = {s: sum(c.status == s for c in self.checks) for s in (PASS, FAIL, NOT_APPLICABLE)}
        lines.append(  # not "N passed, N failed": a CI log would read it as a test run's end
            f"checks: {counts[PASS]} pass, {counts[FAIL]} fail, "
            f"{counts[NOT_APPLICABLE]} not applicable"
        )
        return "\n".join(lines)
