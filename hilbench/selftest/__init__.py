"""``hilbench selftest``: first-contact diagnostics of a device (hilbench/selftest/procedure.py),
recorded as a JSON report and a readable summary (hilbench/selftest/report.py)."""

from hilbench.selftest.procedure import open_backend, run_selftest
from hilbench.selftest.report import FAIL, NOT_APPLICABLE, PASS, Check, Report

__all__ = ["FAIL", "NOT_APPLICABLE", "PASS", "Check", "Report", "open_backend", "run_selftest"]
