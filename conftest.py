"""Repo-wide pytest setup. The hilbench plugin itself loads through its pytest11 entry point."""

from threadpoolctl import threadpool_limits

# One BLAS thread: speed is measured in benchmarks/, and BLAS threads only add noise (and
# contention with the device thread) on the 2-core CI machines.
threadpool_limits(1)

# tests.needs: no silent skips (a missing tool fails naming its install; see the module)
pytest_plugins = ["pytester", "tests.needs"]


def pytest_terminal_summary(terminalreporter) -> None:
    """Repeat the seeds that randomised tests recorded (``record_property("seed", text)``) at
    the end of the run, so that a run with pytest-xdist, whose workers' output is not shown,
    still prints every seed it used."""
    lines = sorted(
        (report.nodeid, value)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == "seed"
    )
    if lines:
        terminalreporter.section("seeds of this run")
        for nodeid, text in lines:
            terminalreporter.write_line(f"{nodeid}: {text}")
