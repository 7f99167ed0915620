"""No silent skips: a missing oracle, compiler, emulator or tool FAILS, in one line naming the
install; only a test that needs hardware or a CPU feature that cannot be here may skip.

A skipped oracle test is a green run that proved nothing. ``need_module``/``need_tool`` fail
the test with the command that installs what is missing; ``HILBENCH_ALLOW_MISSING=1`` (for a
developer's partial install; ignored when ``CI`` is set) makes them skip instead, saying so.

Loaded as a plugin by the root conftest.py, this module also turns any other skip into a
failure, unless its reason names hardware or a CPU feature (``ALLOWED_SKIPS``).
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
from types import ModuleType

import pytest

DEV_EXTRA = "pip install -e '.[dev]' (or tools/install-deps)"

#: Skip reasons that may stand: what cannot be on this machine, not what was not installed.
ALLOWED_SKIPS = (
    r"physical board",  # hardware_timing tests off a board (hilbench's pytest plugin)
    r"\bthis CPU\b",  # kernels for an instruction set this CPU lacks (tests/npu)
    r"not in this build",  # kernels of another architecture (tests/npu)
    r"not built on this platform",  # no native engine off x86-64 Linux (tests/npu)
)
_ALLOWED = re.compile("|".join(ALLOWED_SKIPS))


def lenient() -> bool:
    """True when a developer asked for skips instead of failures (never in CI)."""
    return os.environ.get("HILBENCH_ALLOW_MISSING") == "1" and not os.environ.get("CI")


def missing(what: str, install: str) -> None:
    """Fail (or, when lenient, skip) the running test: ``what`` is missing, ``install`` it."""
    message = f"{what} is not installed: {install}"
    if lenient():
        pytest.skip(f"{message} (HILBENCH_ALLOW_MISSING=1: not tested here)")
    pytest.fail(message, pytrace=False)


def need_module(name: str, install: str = DEV_EXTRA) -> ModuleType:
    """The imported module ``name``, or a one-line failure saying how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        absent = exc.name or name
    missing(f"Python module {name} ({absent} is missing)", install)  # outside: no chained error
    raise AssertionError("unreachable: missing() raised")


def need_tool(command: str, install: str) -> str:
    """The path of ``command``, or a one-line failure saying how to install it."""
    path = shutil.which(command)
    if path is None:
        missing(f"{command}", install)
    return str(path)


def skip_allowed(reason: str) -> bool:
    """True when a skip reason names hardware or a CPU feature (or the developer is lenient)."""
    return bool(_ALLOWED.search(reason)) or lenient()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A skip whose reason is not allowed becomes a failure that quotes it."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    if skip_allowed(reason):
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped, which would hide a test that proved nothing: {reason}\n"
        "install what it needs (tests/needs.py), or skip only for hardware or a CPU feature"
    )
