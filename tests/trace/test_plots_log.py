"""Plot fixes: timing histograms on a log axis, p50/p99 labels that differ when the values
do (instruction counts in full), the backend in compare legends."""

import pytest

from hilbench.trace import Trace
from tests.cli_helpers import hilbench

plots = pytest.importorskip("hilbench.trace.plots")
pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("plots") / "t.h5"
    proc = hilbench("run", "--budget", "400", "--no-live", "--trace", str(path))
    assert proc.returncode == 0, proc.stderr
    return Trace.open(path)


def test_p50_and_p99_labels_tell_close_values_apart():
    # two instruction counts .3g would both print as 1.23e+06
    assert plots._duration_label("p50", 1_234_567.0, 1_234_999.0, "instructions") == (
        "p50 1,234,567 instructions"
    )
    assert plots._duration_label("p99", 1_234_999.0, 1_234_567.0, "instructions") == (
        "p99 1,234,999 instructions"
    )
    assert plots._duration_label("p50", 2.7712, 2.7738, "ms") == "p50 2.771 ms"
    assert plots._duration_label("p99", 2.7738, 2.7712, "ms") == "p99 2.774 ms"
    assert plots._duration_label("p50", 4.83, 19.0, "ms") == "p50 4.83 ms"


def test_timing_histograms_are_on_a_log_axis(trace):
    fig = plots.timing_figure(trace)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == len(trace.timing_percentiles())
    for ax in panels:
        assert ax.get_xscale() == "log"
        assert ax.get_xlabel().endswith("(log scale)")
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels[0].startswith("p50 ") and labels[1].startswith("p99 ")
    svg = plots.svg(plots.timing_figure(trace))
    assert svg.startswith("<svg") and "(log scale)" in svg


def test_compare_legend_names_the_backend(trace):
    assert "emulate" in plots.label(trace)
