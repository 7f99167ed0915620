"""PNG plots of traces (matplotlib, Agg backend): the optional ``report`` extra.

``report_plots(trace, dir)`` writes accuracy.png, loss.png, q.png and timing.png;
``compare_plot(traces, path)`` lays several runs over each other in one figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hilbench.errors import TraceError
from hilbench.trace.reader import Trace

FIGSIZE = (8.0, 4.5)
DPI = 120


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise TraceError(
            "plots need matplotlib, which is not installed",
            "pip install 'hilbench[report]' (or pip install matplotlib)",
        ) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average (the first points average what there is)."""
    if window <= 1 or len(values) == 0:
        return values.astype(float)
    c = np.cumsum(np.insert(values.astype(float), 0, 0.0))
    n = np.arange(1, len(values) + 1)
    lo = np.maximum(n - window, 0)
    return (c[n] - c[lo]) / (n - lo)


def smoothing_window(n_points: int) -> int:
    return max(1, n_points // 40)


def label(trace: Trace) -> str:
    """A run in a legend: file, run, backend, model, scheduler and seed."""
    a = trace.attrs
    sched = trace.config.get("scheduler", "")
    bits = [str(x) for x in (a.get("backend"), a.get("model"), sched, f"seed {a.get('seed')}") if x]
    return f"{trace.path.name}:{trace.run_id} ({', '.join(bits)})"


def _title(trace: Trace, what: str) -> str:
    a = trace.attrs
    return (
        f"{what} — {a.get('model', '?')} on {a.get('dataset', '?')}, "
        f"{a.get('backend', '?')}, run {trace.run_id} ({trace.status})"
    )


def _fp_axis(ax: Any) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
    ax.set_xlabel("forward passes")
    ax.grid(alpha=0.3)


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    _pyplot().close(fig)
    return path


def report_plots(trace: Trace, out_dir: str | Path) -> list[Path]:
    """Write the report's PNGs for one run into ``out_dir``; return their paths."""
    plt = _pyplot()
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceError(
            f"cannot create the plot directory {out} ({exc.strerror or exc})",
            "choose a writable directory for --plot",
        ) from None
    written = []

    # accuracy vs forward passes
    fig, ax = plt.subplots(figsize=FIGSIZE)
    for split, style in (("test", "o-"), ("train", "s--")):
        fp, acc = trace.accuracy_curve(split)
        if len(fp):
            ax.plot(fp, acc, style, markersize=3, label=f"{split} accuracy")
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy (fraction)")
    ax.set_title(_title(trace, "accuracy"), fontsize=10)
    _fp_axis(ax)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower right")
    written.append(_save(fig, out / "accuracy.png"))

    # loss vs forward passes
    fig, ax = plt.subplots(figsize=FIGSIZE)
    fp, loss = trace.loss_curve()
    if len(fp):
        w = smoothing_window(len(loss))
        ax.plot(fp, loss, color="tab:blue", alpha=0.25, linewidth=0.6, label="step loss (batch)")
        ax.plot(
            fp,
            smooth(loss, w),
            color="tab:blue",
            linewidth=1.6,
            label=f"step loss, mean of {w} steps",
        )
    tests = trace.evals[trace.evals["split"] == "test"]
    if len(tests):
        ax.plot(
            tests["forward_passes"],
            tests["loss"],
            "o",
            color="tab:orange",
            markersize=4,
            label="test loss",
        )
    ax.set_ylabel("loss (nats)")
    ax.set_title(_title(trace, "loss"), fontsize=10)
    _fp_axis(ax)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right")
    written.append(_save(fig, out / "loss.png"))

    # q over steps
    fig, ax = plt.subplots(figsize=FIGSIZE)
    if trace.n_steps:
        ax.step(trace.steps["step"], trace.steps["q"], where="post", color="tab:green")
        ax.set_ylim(0, max(int(trace.steps["q"].max()) * 1.15, 1.5))
    ax.set_xlabel("step")
    ax.set_ylabel("q (perturbation samples per step)")
    ax.set_title(_title(trace, "q"), fontsize=10)
    ax.grid(alpha=0.3)
    written.append(_save(fig, out / "q.png"))

    fig = timing_figure(trace)
    written.append(_save(fig, out / "timing.png"))
    return written


def _duration_label(p: str, value: float, other: float, unit: str) -> str:
    """``p50 1,234,567 instructions``: a count in full; a duration with the digits that tell
    it from the other percentile (p50 and p99 never read the same unless they are)."""
    if unit == "instructions":
        return f"{p} {value:,.0f} {unit}"
    for digits in range(3, 10):
        text, twin = f"{value:.{digits}g}", f"{other:.{digits}g}"
        if text != twin or value == other:
            break
    return f"{p} {text} {unit}"


def _log_ticks(ax: Any, lo: float, hi: float) -> None:
    """Four labelled ticks spread over [lo, hi] on a log axis (a narrow span has no decade
    tick of its own), the minor ticks unlabelled."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ax.xaxis.set_major_locator(FixedLocator(np.geomspace(lo, hi, 4)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.3g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def timing_figure(trace: Trace) -> Any:
    """The timing histograms, one panel per (command, source), on a log axis (durations
    spread over decades: a retry's timeout next to a fast answer); p50 and p99 marked."""
    plt = _pyplot()
    stats = trace.timing_percentiles((50, 99))
    keys = list(stats)
    cols = min(3, max(1, len(keys)))
    rows = max(1, -(-len(keys) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 2.8 * rows), squeeze=False)
    t = trace.timing
    for ax, (cmd, src) in zip(axes.flat, keys, strict=False):
        scale, unit = (1.0, "instructions") if src == "instr" else (1e3, "ms")  # a count: as is
        d = t["duration_s"][(t["command"] == cmd) & (t["source"] == src)] * scale
        d = d[d > 0] if (d > 0).any() else np.abs(d) + 1e-12  # a log axis: positive values
        lo, hi = float(d.min()), float(d.max())
        if hi <= lo * (1 + 1e-9):  # one value (a cost model): one bar around it
            lo, hi = lo / 1.05, hi * 1.05
        bins = np.geomspace(lo, hi, min(40, max(5, len(d) // 5)) + 1)
        ax.hist(d, bins=bins, color="tab:purple", alpha=0.8)
        ax.set_xscale("log")
        _log_ticks(ax, float(bins[0]), float(bins[-1]))
        s = stats[(cmd, src)]
        p50, p99 = s["p50"] * scale, s["p99"] * scale
        for p, ls, v, other in (("p50", "-", p50, p99), ("p99", ":", p99, p50)):
            ax.axvline(
                v,
                color="black",
                linestyle=ls,
                linewidth=1,
                label=_duration_label(p, v, other, unit),
            )
        ax.set_title(f"{cmd} ({src}), n = {s['count']}", fontsize=9)
        ax.set_xlabel(f"{unit} (log scale)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, which="both")
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    if not keys:
        axes.flat[0].text(0.5, 0.5, "no timing rows", ha="center", va="center")
    fig.suptitle(_title(trace, "command timing"), fontsize=10)
    return fig


def curves_figure(trace: Trace) -> Any:
    """Test accuracy and the step loss (with its moving mean and the test loss) against
    forward passes, side by side."""
    plt = _pyplot()
    fig, (acc_ax, loss_ax) = plt.subplots(1, 2, figsize=(11, 3.6))
    for split, style in (("test", "o-"), ("train", "s--")):
        fp, acc = trace.accuracy_curve(split)
        if len(fp):
            acc_ax.plot(fp, acc, style, markersize=3, label=f"{split} accuracy")
    acc_ax.set_ylim(0, 1)
    acc_ax.set_ylabel("accuracy (fraction)")
    acc_ax.set_title(_title(trace, "accuracy"), fontsize=9)
    fp, loss = trace.loss_curve()
    if len(fp):
        w = smoothing_window(len(loss))
        loss_ax.plot(fp, loss, color="tab:blue", alpha=0.25, linewidth=0.6, label="step loss")
        loss_ax.plot(fp, smooth(loss, w), color="tab:blue", label=f"mean of {w} steps")
    tests = trace.evals[trace.evals["split"] == "test"]
    if len(tests):
        loss_ax.plot(
            tests["forward_passes"],
            tests["loss"],
            "o",
            color="tab:orange",
            markersize=4,
            label="test loss",
        )
    loss_ax.set_ylabel("loss (nats)")
    loss_ax.set_title(_title(trace, "loss"), fontsize=9)
    for ax in (acc_ax, loss_ax):
        _fp_axis(ax)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return fig


def svg(fig: Any) -> str:
    """The figure as an inline ``<svg>`` element (text kept as text), the figure closed."""
    import io

    buf = io.StringIO()
    fig.tight_layout()
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "hilbench"}):
        fig.savefig(buf, format="svg")
    _pyplot().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def compare_plot(traces: Sequence[Trace], path: str | Path) -> Path:
    """One PNG: test accuracy and smoothed step loss against forward passes, one line a run."""
    plt = _pyplot()
    path = Path(path)
    if path.parent and not path.parent.exists():
        try:
            path.parent.mkdir(parents=True)
        except OSError as exc:
            raise TraceError(
                f"cannot create {path.parent} ({exc.strerror or exc})",
                "choose a writable path for --plot",
            ) from None
    fig, (acc_ax, loss_ax) = plt.subplots(1, 2, figsize=(13, 4.8))
    for i, tr in enumerate(traces):
        color = f"C{i % 10}"
        fp, acc = tr.accuracy_curve("test")
        acc_ax.plot(fp, acc, "o-", markersize=3, color=color, label=label(tr))
        fp, loss = tr.loss_curve()
        loss_ax.plot(fp, smooth(loss, smoothing_window(len(loss))), color=color)
    acc_ax.set_ylim(0, 1)
    acc_ax.set_ylabel("test accuracy (fraction)")
    acc_ax.set_title("test accuracy", fontsize=10)
    loss_ax.set_ylabel("step loss (nats, moving mean)")
    loss_ax.set_title("training loss", fontsize=10)
    for ax in (acc_ax, loss_ax):
        _fp_axis(ax)
    fig.legend(
        *acc_ax.get_legend_handles_labels(),
        loc="lower center",
        ncol=min(3, max(1, len(traces))),
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0.06 + 0.035 * ((len(traces) - 1) // 3), 1, 1))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
