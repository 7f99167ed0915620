"""One self-contained HTML page for every run in a folder of traces (``hilbench report DIR
--html out.html``): a table of the runs, the runs grouped by test and backend with their
weights CRCs compared, and each run's curves and timing histograms as inline SVG.

Nothing is fetched when the page opens (no script, no font, no stylesheet from elsewhere):
it can be mailed, attached to a CI job or opened from a disk.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilbench.errors import HilbenchError
from hilbench.trace.parting import compare_runs
from hilbench.trace.reader import Trace, open_runs

#: Config keys that name where a run ran, not what it computed (not part of a group's key).
WHERE_KEYS = ("backend", "port", "baud", "firmware", "trace", "link_faults", "live")


@dataclass
class Folder:
    """Every run of every trace under a folder, and the files that could not be read."""

    root: Path
    runs: list[Trace] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)


def read_folder(root: str | Path) -> Folder:
    """Open every run of every ``*.h5`` under ``root`` (sorted by path, then run)."""
    root = Path(root)
    if not root.is_dir():
        raise HilbenchError(f"{root} is not a folder", "name a folder of .h5 traces")
    folder = Folder(root)
    for path in sorted(root.rglob("*.h5")):
        try:
            folder.runs.extend(open_runs(path))
        except (HilbenchError, OSError) as exc:
            folder.unreadable.append((path, str(exc)))
    return folder


def run_group(trace: Trace) -> str:
    """The test a run belongs to: the pytest test (``pytest --backends`` records it) or, for
    a run of ``hilbench run``, what it trained (model, data, scheduler, seed, budget)."""
    extra = trace.config.get("extra") or {}
    if isinstance(extra, dict) and extra.get("pytest_test"):
        return str(extra["pytest_test"])
    c, a = trace.config, trace.attrs
    return (
        f"{a.get('model', '?')} on {a.get('dataset', '?')}, {c.get('scheduler', '?')}, "
        f"seed {a.get('seed', '?')}, budget {c.get('budget', '?'):,}"
        if isinstance(c.get("budget"), int)
        else f"{a.get('model', '?')} on {a.get('dataset', '?')}"
    )


def _what(trace: Trace) -> tuple:
    """What a run computed: its config without where it ran (runs to compare share it)."""
    settings = sorted((k, repr(v)) for k, v in trace.config.items() if k not in WHERE_KEYS)
    return (*settings, run_group(trace))


def groups(runs: Iterable[Trace]) -> dict[str, list[Trace]]:
    """Runs of the same test and settings, by test; a test's runs with other settings get
    a group of their own (``test (2)``)."""
    by_what: dict[tuple, list[Trace]] = {}
    for trace in runs:
        by_what.setdefault(_what(trace), []).append(trace)
    out: dict[str, list[Trace]] = {}
    for what, traces in by_what.items():
        name, n = what[-1], 1
        while name in out:
            n += 1
            name = f"{what[-1]} ({n})"
        out[name] = traces
    return out


def _crc(value: int | None) -> str:
    return "-" if value is None else f"0x{value:08x}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2%}"


def wall_s(trace: Trace) -> float | None:
    """The run's wall-clock time from its start and end attributes, None if unfinished."""
    try:
        start = dt.datetime.fromisoformat(str(trace.attrs.get("start_time")).replace("Z", ""))
        end = dt.datetime.fromisoformat(str(trace.attrs.get("end_time")).replace("Z", ""))
    except ValueError:
        return None
    start, end = start.replace(tzinfo=None), end.replace(tzinfo=None)
    return (end - start).total_seconds()


def config_text(trace: Trace) -> str:
    c = trace.config
    parts = [str(c.get("scheduler", "?"))]
    for key, fmt in (("budget", "budget {:,}"), ("lr", "lr {:g}"), ("eps", "eps {}")):
        if isinstance(c.get(key), int | float):
            parts.append(fmt.format(c[key]))
    parts.append(f"seed {trace.attrs.get('seed', '?')}")
    for key in ("time_limit_s", "until"):
        if c.get(key):
            parts.append(f"{key} {c[key]}")
    return ", ".join(parts)


def status_text(trace: Trace) -> str:
    reason = str(trace.attrs.get("stop_reason") or "")
    if trace.status == "complete" and reason and reason != "budget":
        return f"complete (stopped: {reason})"
    if trace.status != "complete" and trace.error:
        return f"{trace.status}: {trace.error.splitlines()[0][:200]}"
    return trace.status


def _anchor(trace: Trace, root: Path) -> str:
    rel = trace.path.resolve().relative_to(root.resolve()) if root else trace.path
    return "run-" + "".join(ch if ch.isalnum() else "-" for ch in f"{rel}-{trace.run_id}")


def _events_text(trace: Trace) -> str:
    counts = trace.event_counts()
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


CSS = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; font-size: 0.9em; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.same { color: #1a7f37; font-weight: bold; }
.parts { color: #c62828; font-weight: bold; }
.status-failed, .status-interrupted, .status-running { color: #c62828; }
section.run { border-top: 2px solid #ddd; margin-top: 1.5em; }
svg { max-width: 100%; height: auto; }
"""


def render(folder: Folder, *, plots: bool = True) -> str:
    """The page for ``folder`` (plots need matplotlib; ``plots=False`` leaves them out)."""
    root = folder.root
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>hilbench report: {_e(root)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>hilbench report: {_e(root)}</h1>",
        f"<p id='summary'>{len(folder.runs)} runs in "
        f"{len({t.path for t in folder.runs})} trace files; written "
        f"{dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}</p>",
    ]
    if folder.unreadable:
        out.append("<h2>Files that could not be read</h2><ul id='unreadable'>")
        out += [f"<li>{_e(p)}: {_e(why)}</li>" for p, why in folder.unreadable]
        out.append("</ul>")
    out += _runs_table(folder)
    out += _groups(folder)
    for trace in folder.runs:
        out += _run_section(trace, root, plots)
    out.append("</body></html>")
    return "\n".join(out)


RUN_COLUMNS = (
    "run",
    "backend",
    "model",
    "config",
    "status",
    "accuracy",
    "forward passes",
    "time",
    "events",
)


def _runs_table(folder: Folder) -> list[str]:
    out = ["<h2>Runs</h2>", "<table id='runs'><thead><tr>"]
    out += [f"<th>{c}</th>" for c in RUN_COLUMNS]
    out.append("</tr></thead><tbody>")
    for t in folder.runs:
        took = wall_s(t)
        cells = [
            f"<a href='#{_anchor(t, folder.root)}'>{_e(t.path.name)} · {_e(t.run_id)}</a>",
            _e(t.backend or "?"),
            _e(f"{t.attrs.get('model', '?')} on {t.attrs.get('dataset', '?')}"),
            _e(config_text(t)),
            f"<span class='status-{_e(t.status)}'>{_e(status_text(t))}</span>",
            _pct(t.final_accuracy),
            f"{t.forward_passes:,}",
            "-" if took is None else f"{took:.1f} s",
            _e(_events_text(t)),
        ]
        classes = ["", "", "", "", "", "num", "num", "num", ""]
        out.append(
            "<tr>"
            + "".join(
                f"<td class='{c}'>{v}</td>" if c else f"<td>{v}</td>"
                for c, v in zip(classes, cells, strict=True)
            )
            + "</tr>"
        )
    out.append("</tbody></table>")
    return out


def _groups(folder: Folder) -> list[str]:
    out = ["<h2>By test and backend</h2>", "<table id='groups'><thead><tr>"]
    out += [f"<th>{c}</th>" for c in ("test", "backend", "run", "steps", "weights CRC", "verdict")]
    out.append("</tr></thead><tbody>")
    for name, traces in groups(folder.runs).items():
        complete = [t for t in traces if t.status == "complete"]
        labels = _labels(complete)
        partings = compare_runs(dict(zip(labels, complete, strict=True)))
        if len(complete) < 2:
            verdict = "<span>one complete run: nothing to compare</span>"
        elif partings:
            verdict = "<span class='parts'>PARTS: " + _e("; ".join(map(str, partings))) + "</span>"
        else:
            verdict = f"<span class='same'>same on {_e(', '.join(labels))}</span>"
        for i, t in enumerate(traces):
            first = f"<td rowspan='{len(traces)}'>{_e(name)}</td>" if i == 0 else ""
            last = f"<td rowspan='{len(traces)}'>{verdict}</td>" if i == 0 else ""
            out.append(
                f"<tr>{first}<td>{_e(t.backend or '?')}</td>"
                f"<td><a href='#{_anchor(t, folder.root)}'>{_e(t.path.name)} · {_e(t.run_id)}</a>"
                f"</td><td class='num'>{t.n_steps:,}</td><td>{_crc(t.weights_crc)}</td>{last}</tr>"
            )
    out.append("</tbody></table>")
    return out


def _labels(traces: list[Trace]) -> list[str]:
    """Each run's backend, made unique (``sil``, ``sil #2``) for the comparison."""
    seen: dict[str, int] = {}
    out = []
    for t in traces:
        name = t.backend or "?"
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return out


def _run_section(trace: Trace, root: Path, plots: bool) -> list[str]:
    t = trace
    out = [
        f"<section class='run' id='{_anchor(t, root)}'>",
        f"<h3>{_e(t.path)} · run {_e(t.run_id)} · {_e(t.backend or '?')}</h3>",
        "<table class='facts'>",
    ]
    facts: list[tuple[str, Any]] = [
        ("status", status_text(t)),
        (
            "device",
            f"{t.attrs.get('device_id') or '?'} (firmware {t.attrs.get('firmware') or '?'})",
        ),
        ("config", config_text(t)),
        ("final accuracy", _pct(t.final_accuracy)),
        ("forward passes", f"{t.forward_passes:,}"),
        ("steps", f"{t.n_steps:,}"),
        ("weights CRC", _crc(t.weights_crc)),
        ("events", _events_text(t)),
    ]
    out += [f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts]
    out.append("</table>")
    if len(t.events):
        out.append("<details><summary>events</summary><table class='events'>")
        out.append("<tr><th>step</th><th>kind</th><th>detail</th></tr>")
        for row in t.events[-200:]:
            out.append(
                f"<tr><td class='num'>{int(row['step'])}</td><td>{_e(_text(row['kind']))}</td>"
                f"<td>{_e(_text(row['detail'])[:500])}</td></tr>"
            )
        out.append("</table></details>")
    if plots:
        from hilbench.trace.plots import curves_figure, svg, timing_figure

        out.append(f"<div class='plot curves'>{svg(curves_figure(t))}</div>")
        out.append(f"<div class='plot timing'>{svg(timing_figure(t))}</div>")
    out.append("</section>")
    return out


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def write(root: str | Path, out: str | Path, *, plots: bool = True) -> tuple[Path, Folder]:
    """Write the page for the folder ``root`` to ``out``; (path, what it read)."""
    folder = read_folder(root)
    page = render(folder, plots=plots)
    path = Path(out)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise HilbenchError(
            f"cannot write {path} ({exc.strerror or exc})", "choose a writable path for --html"
        ) from None
    return path, folder
