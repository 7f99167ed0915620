"""pytest plugin (entry point ``pytest11``): one option picks the device every test talks to.

``pytest --emulate`` (default) runs the twin in-process behind a pty; ``--board=PORT`` drives a
board or any pyserial URL (``socket://HOST:PORT`` from ``hilbench emulate``); ``--qemu`` runs
the firmware in QEMU. Fixtures: ``hil_backend`` (session), ``device`` (the connected Target),
``zo_session`` (train and get the trace back), ``trace_path`` (this test's trace file).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hilbench.backends import Backend, make_backend
from hilbench.config import RunConfig
from hilbench.console import LiveView, NullView, RunView
from hilbench.errors import HilbenchError
from hilbench.target.client import Target


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hilbench", "hilbench: the device under test")
    group.addoption(
        "--emulate", action="store_true", help="use the bit-exact device twin (default)"
    )
    group.addoption(
        "--board",
        metavar="PORT",
        help="use a board or any pyserial URL, e.g. /dev/ttyACM0, socket://HOST:PORT",
    )
    group.addoption("--qemu", action="store_true", help="use the firmware under qemu-system-arm")
    group.addoption("--trace-dir", metavar="DIR", help="where tests write their HDF5 traces")
    group.addoption("--no-live", action="store_true", help="no live training panel while tests run")
    group.addoption(
        "--link-faults",
        metavar="SPEC",
        default="",
        help="inject link faults into every test's device, e.g. drop=0.01,reset=0.001,seed=1",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "hardware_timing: needs durations measured on a physical board; skipped on other backends",
    )
    chosen = [
        name
        for name, on in (
            ("--emulate", config.getoption("--emulate")),
            ("--board", bool(config.getoption("--board"))),
            ("--qemu", config.getoption("--qemu")),
        )
        if on
    ]
    if len(chosen) > 1:
        raise pytest.UsageError(f"hilbench: choose one backend, not {' and '.join(chosen)}")
    try:
        backend_config(config)
        if not config.getoption("--board") and not config.getoption("--qemu"):
            from hilbench.npu.ops import _backend

            _backend.check_env()  # the emulator's NPU
    except HilbenchError as exc:
        raise pytest.UsageError(f"hilbench: {exc}") from None
    if config.getoption("--qemu"):
        from hilbench.backends import QemuBackend

        try:
            QemuBackend.check_available()
        except HilbenchError as exc:
            raise pytest.UsageError(f"hilbench --qemu: {exc}") from None


def backend_config(config: pytest.Config) -> RunConfig:
    """The RunConfig skeleton the command-line options describe."""
    faults = config.getoption("--link-faults")
    if config.getoption("--qemu"):
        return RunConfig(backend="qemu", link_faults=faults)
    if config.getoption("--board"):
        return RunConfig(backend="board", port=config.getoption("--board"), link_faults=faults)
    return RunConfig(backend="emulate", link_faults=faults)


@pytest.fixture(scope="session")
def hil_backend(pytestconfig: pytest.Config) -> Iterator[Backend]:
    """The opened backend, shared by the whole session (one device, one connection)."""
    backend = make_backend(backend_config(pytestconfig))
    try:
        backend.open()
    except HilbenchError as exc:
        pytest.fail(f"hilbench: {exc}", pytrace=False)
    yield backend
    backend.close()


@pytest.fixture
def device(hil_backend: Backend) -> Target:
    """The connected device for the chosen backend; it has answered HELLO."""
    assert hil_backend.target is not None
    hil_backend.target.hello()
    return hil_backend.target


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("hardware_timing") is None:
        return
    if backend_config(item.config).backend != "board":
        pytest.skip("needs device-measured timing: run with --board=PORT on a physical board")


@pytest.fixture(scope="session")
def hil_trace_dir(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    option = pytestconfig.getoption("--trace-dir")
    path = Path(option) if option else tmp_path_factory.mktemp("traces")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def trace_path(request: pytest.FixtureRequest, hil_trace_dir: Path) -> Path:
    """This test's trace file (one run group per zo_session call)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid).strip("_")
    return hil_trace_dir / f"{name}.h5"


def _view(config: pytest.Config) -> RunView:
    """A transient live panel on pytest's own terminal, shown with capture suspended."""
    if config.getoption("--no-live"):
        return NullView()
    capman = config.pluginmanager.getplugin("capturemanager")
    guard = capman.global_and_fixture_disabled if capman else nullcontext
    with guard():  # with capture suspended, stdout is pytest's own terminal again
        if not sys.stdout.isatty():
            return NullView()
    from rich.console import Console

    return LiveView(Console(force_terminal=True), guard=guard, transient=True)


@dataclass(frozen=True)
class SessionOutcome:
    """A finished training run and its trace, opened for asserting.

    ``outcome.check(Limit("final_accuracy", low=0.9, units="fraction", marginal_low=0.92))``
    judges limits (hilbench.trace.limits) on the trace: a failure fails the test naming the
    value, the limit and the trace; a marginal pass warns; each result becomes JUnit
    properties ``hilbench.limit.<name>``, ``.value`` and ``.limit``.
    """

    result: Any  # hilbench.session.RunResult
    trace: Any  # hilbench.trace.Trace
    replay: Any = None  # hilbench.trace.replay.ReplayResult: the trace replayed, CRC matched
    record: Callable[[str, object], None] | None = field(default=None, repr=False, compare=False)

    def check(self, *limits: Any) -> list[Any]:
        """Judge ``limits`` on this run's trace (see the class docstring)."""
        from hilbench.trace.limits import check

        __tracebackhide__ = True
        return check(self.trace, *limits, record=self.record, stacklevel=3)


@pytest.fixture
def zo_session(
    request: pytest.FixtureRequest, hil_backend: Backend, device: Target, trace_path: Path
) -> Callable[..., SessionOutcome]:
    """Train on the test's device: ``zo_session(budget=4000, scheduler="fixed:2")``."""
    from hilbench import session
    from hilbench.trace import Trace

    base = backend_config(request.config)

    def record(name: str, value: object) -> None:
        request.node.user_properties.append((name, value))

    def run(**overrides: Any) -> SessionOutcome:
        from hilbench.trace.replay import replay

        config = base.replace(trace=trace_path, **overrides)
        result = session.run(config, view=_view(request.config), target=device)
        trace = Trace.open(result.trace_path, run=result.run_id)
        for key in ("final_accuracy", "forward_passes", "steps"):
            record(f"hilbench.{key}", getattr(result, key))
        record("hilbench.trace", str(result.trace_path))
        # Invariant 2 for every trace the suite writes: rebuild the weights from the trace.
        replayed = replay(trace)
        record("hilbench.replay", "match" if replayed.matches else "MISMATCH")
        if not replayed.matches:
            pytest.fail(f"hilbench: {replayed.message()}", pytrace=False)
        return SessionOutcome(result=result, trace=trace, replay=replayed, record=record)

    return run
