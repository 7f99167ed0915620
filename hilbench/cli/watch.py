"""``hilbench watch TRACE [--run ID] [--interval S]``: follow a run from another terminal.

Reads the trace in SWMR mode as the writer appends to it and shows step, q, loss, test
accuracy and progress: a live panel on a terminal, a line per update elsewhere. Exits when
the run finishes (0 if complete, 1 if interrupted or failed), when its writer is gone
(killed: 1), or on Ctrl-C (130). On a finished file it shows the final state and exits.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SPARK = "▁▂▃▄▅▆▇█"
EXIT_NOT_COMPLETE = 1
EXIT_INTERRUPTED = 130
#: A run whose writer holds no lock for this long is taken as orphaned (writer killed).
ORPHAN_AFTER_S = 2.0
#: A file that cannot be read for this long (mid-setup, mid-replace) is an error.
UNREADABLE_AFTER_S = 5.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("watch", help="follow a run as it is written (works on finished files)")
    p.add_argument("trace", type=Path)
    p.add_argument("--run", help="run id (default: the last run in the file)")
    p.add_argument("--interval", type=float, default=0.5, metavar="S", help="poll period (0.5 s)")
    p.add_argument("--plain", action="store_true", help="plain lines even on a terminal")
    p.set_defaults(handler=handle)


@dataclass
class State:
    """What the view shows, accumulated over polls."""

    path: Path
    run_id: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    budget: int | None = None
    step: int | None = None
    q: int | None = None
    loss: float | None = None  # exponential moving average of the step loss
    forward_passes: int = 0
    accuracy: float | None = None
    accuracy_fp: int | None = None
    steps_total: int = 0
    events: dict[str, int] = field(default_factory=dict)
    history: list[float] = field(default_factory=list)
    rate: float | None = None  # steps per second, measured by the watcher
    _last: tuple[float, int] | None = None

    def absorb(self, up: Any) -> bool:
        """Fold one Follower update in; True if anything changed."""
        changed = self.attrs != up.attrs or bool(len(up.steps) + len(up.evals) + len(up.events))
        self.run_id, self.attrs = up.run_id, up.attrs
        for row in up.steps:
            loss = float(row["loss"])
            if math.isfinite(loss):
                self.loss = loss if self.loss is None else 0.95 * self.loss + 0.05 * loss
            self.step, self.q = int(row["step"]), int(row["q"])
            self.forward_passes = int(row["forward_passes"])
            if self.loss is not None and (not self.history or int(row["step"]) % 10 == 0):
                self.history.append(self.loss)
        self.history = self.history[-60:]
        for row in up.evals:
            if row["split"] == "test":
                self.accuracy, self.accuracy_fp = float(row["accuracy"]), int(row["forward_passes"])
        for kind in up.events["kind"].tolist():
            self.events[kind] = self.events.get(kind, 0) + 1
        now = time.monotonic()
        if self._last is not None and up.total_steps > self._last[1]:
            dt = now - self._last[0]
            if dt > 0:
                inst = (up.total_steps - self._last[1]) / dt
                self.rate = inst if self.rate is None else 0.7 * self.rate + 0.3 * inst
        if self._last is None or up.total_steps > self._last[1]:
            self._last = (now, up.total_steps)
        self.steps_total = up.total_steps
        return changed

    @property
    def status(self) -> str:
        return str(self.attrs.get("status", "running"))

    @property
    def finished(self) -> bool:
        return bool(self.attrs.get("finished", False))

    def title(self) -> str:
        a = self.attrs
        return (
            f"hilbench watch · {self.path} · run {self.run_id} · {a.get('model', '?')} on "
            f"{a.get('dataset', '?')} · {a.get('backend', '?')} {a.get('device_id', '')}".rstrip()
        )

    def progress(self) -> str:
        if self.budget:
            return f"{self.forward_passes:,}/{self.budget:,}"
        return f"{self.forward_passes:,}"

    def line(self) -> str:
        loss = "-" if self.loss is None else f"{self.loss:.4f}"
        acc = "-" if self.accuracy is None else f"{self.accuracy:.1%}"
        rate = "" if self.rate is None else f" {self.rate:,.0f} steps/s"
        ev = "".join(f" {k} {v}" for k, v in self.events.items())
        return (
            f"[watch] {self.status} step {self.step if self.step is not None else '-'} "
            f"q {self.q if self.q is not None else '-'} loss {loss} acc {acc} "
            f"fwd {self.progress()}{rate}{ev}"
        )

    def sparkline(self) -> str:
        h = self.history
        if len(h) < 2:
            return ""
        lo, hi = min(h), max(h)
        span = (hi - lo) or 1.0
        return "".join(SPARK[min(7, int((v - lo) / span * 7.999))] for v in h)

    def render(self) -> Any:
        from rich.table import Table

        table = Table(title=self.title(), title_justify="left")
        for col in ("status", "step", "q", "loss (EMA)", "test acc", "forward passes", "rate"):
            table.add_column(col, justify="right")
        table.add_row(
            self.status,
            "-" if self.step is None else f"{self.step:,}",
            "-" if self.q is None else str(self.q),
            "-" if self.loss is None else f"{self.loss:.4f}",
            "-" if self.accuracy is None else f"{self.accuracy:.1%} @ {self.accuracy_fp or 0:,}",
            self.progress(),
            "-" if self.rate is None else f"{self.rate:,.0f} steps/s",
        )
        spark = self.sparkline()
        if spark:
            table.caption = f"loss {spark}"
        if self.events:
            events = ", ".join(f"{k} {v}" for k, v in self.events.items())
            table.caption = f"{table.caption or ''}   events: {events}".strip()
        return table


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    from hilbench.errors import ConfigError, TraceError
    from hilbench.trace import Follower, writer_alive

    if not args.interval > 0:
        raise ConfigError(f"--interval {args.interval} must be positive", "e.g. --interval 0.5")
    follower = Follower(args.trace, args.run)
    state = State(Path(args.trace))
    deadline = time.monotonic() + UNREADABLE_AFTER_S
    while True:  # a missing, foreign or newer file fails here, one line
        try:
            first = follower.poll()
            break
        except TraceError as exc:
            # a run being set up right now (file created, run group not yet, or the writer
            # between creating the file and switching it to SWMR) is worth a wait
            transient = any(
                s in exc.cause
                for s in ("holds no runs", "another process", "is corrupt", "left open")
            )
            if not transient or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    state.absorb(first)
    budget = None
    if isinstance(state.attrs.get("config_json"), str):
        import json

        try:
            budget = json.loads(state.attrs["config_json"]).get("budget")
        except ValueError:
            budget = None
    state.budget = budget if isinstance(budget, int) else None

    console = Console()
    live = None
    if console.is_terminal and not args.plain:
        from rich.live import Live

        live = Live(state.render(), console=console, auto_refresh=False, transient=False)
        live.start()
    else:
        print(state.title(), flush=True)
        print(state.line(), flush=True)
    orphan_since: float | None = None
    unreadable_since: float | None = None
    try:
        while not state.finished:
            time.sleep(args.interval)
            try:
                up = follower.poll()
            except TraceError:
                # the writer may be mid-setup or replacing the file with its gzip'd copy
                unreadable_since = unreadable_since or time.monotonic()
                if time.monotonic() - unreadable_since > UNREADABLE_AFTER_S:
                    raise
                continue
            unreadable_since = None
            changed = state.absorb(up)
            if live is not None:
                live.update(state.render(), refresh=True)
            elif changed:
                print(state.line(), flush=True)
            if state.finished:
                break
            if writer_alive(args.trace) is False:
                orphan_since = orphan_since or time.monotonic()
                if time.monotonic() - orphan_since >= ORPHAN_AFTER_S:
                    if live is not None:
                        live.stop()
                        live = None
                    print(
                        f"hilbench: the writer of {args.trace} is gone (killed?): run "
                        f"{state.run_id} stays 'running' with {state.steps_total:,} steps on "
                        "disk. `hilbench run --resume` continues it",
                        file=sys.stderr,
                    )
                    return EXIT_NOT_COMPLETE
            else:
                orphan_since = None
    except KeyboardInterrupt:
        if live is not None:
            live.stop()
            live = None
        print("hilbench: stopped watching (the run goes on)", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if live is not None:
            live.update(state.render(), refresh=True)
            live.stop()
    print(f"run {state.run_id} finished: {state.status}", flush=True)
    return 0 if state.status == "complete" else EXIT_NOT_COMPLETE
