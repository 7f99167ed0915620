"""pytest plugin (entry point ``pytest11``): one option picks the device every test talks to.

``pytest --emulate`` (default) runs the twin in-process behind a pty; ``--board=PORT`` drives a
board or any pyserial URL (``socket://HOST:PORT`` from ``hilbench emulate``); ``--qemu`` runs
the firmware in QEMU. Fixtures: ``hil_backend`` (session), ``device`` (the connected DeviceClient),
``zo_session`` (train and get the trace back), ``trace_path`` (this test's trace file).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import logging
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hilbench.backend.base import Backend, Connection
from hilbench.backend.registry import make_backend
from hilbench.client.device_client import DeviceClient
from hilbench.config import BACKEND_NAMES, RunConfig
from hilbench.console import LiveView, NullView, RunView
from hilbench.errors import HilbenchError


@dataclass(frozen=True)
class BackendOption:
    """One backend option: its flag, the RunConfig backend it picks and, for an option that
    takes a value (``--board=PORT``), the RunConfig field the value fills."""

    flag: str
    backend: str
    help: str
    metavar: str | None = None
    field: str | None = None


#: Which device every test talks to: one option per backend of hilbench.config.BACKEND_NAMES
#: (the table the CLI reads too), the first is the default. The options, the one-backend-only check
#: and backend_config() all read this table.
BACKEND_OPTIONS = tuple(
    BackendOption(
        f"--{name}",
        name,
        backend.test_help,
        metavar="PORT" if backend.port else None,
        field="port" if backend.port else None,
    )
    for name, backend in BACKEND_NAMES.items()
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hilbench", "hilbench: the device under test")
    for option in BACKEND_OPTIONS:
        if option.metavar:
            group.addoption(option.flag, metavar=option.metavar, help=option.help)
        else:
            group.addoption(option.flag, action="store_true", help=option.help)
    group.addoption(
        "--fw",
        metavar="PATH",
        help="the firmware to run with --sil (the SIL program), --qemu (an ELF) or --board (the "
        "stm32n6 ELF loaded when the board runs another build); default: build device_fw with make",
    )
    group.addoption(
        "--baud",
        metavar="RATE",
        help="the board's serial speed (default 921600, or $HILBENCH_BAUD, then "
        "[tool.hilbench] baud in pyproject.toml)",
    )
    group.addoption("--trace-dir", metavar="DIR", help="where tests write their HDF5 traces")
    group.addoption("--no-live", action="store_true", help="no live training panel while tests run")
    group.addoption(
        "--backends",
        metavar="LIST",
        help="run each test that uses device or zo_session once per backend, the backend in "
        "its id, and compare their runs: e.g. emulate,sil,qemu (a board: its PORT, "
        "labgrid:PLACE or map:FILE, or board=PORT)",
    )
    group.addoption(
        "--time-limit",
        metavar="DURATION",
        help="every zo_session run stops after this much wall clock (30s, 5m) as complete; "
        "a test's time_limit_s= wins",
    )
    group.addoption(
        "--until",
        metavar="RULE",
        help='every zo_session run stops when RULE holds, e.g. "accuracy>=0.9"; a test\'s '
        "until= wins",
    )
    group.addoption(
        "--link-faults",
        metavar="SPEC",
        default="",
        help="inject link faults into every test's device, e.g. drop=0.01,reset=0.001,seed=1",
    )


def chosen_backend(config: pytest.Config) -> tuple[BackendOption, str | None]:
    """The backend option given on the command line (the default if none) and its value."""
    chosen = []
    for option in BACKEND_OPTIONS:
        value = config.getoption(option.flag)
        if (value is not None) if option.metavar else value:
            chosen.append((option, value.strip() if option.metavar else None))
    if len(chosen) > 1:
        names = " and ".join(option.flag for option, _ in chosen)
        raise pytest.UsageError(f"hilbench: choose one backend, not {names}")
    if not chosen:  # a board named once: $HILBENCH_BOARD, then pyproject.toml [tool.hilbench]
        board = _user_defaults().board
        if board is not None:
            return next(o for o in BACKEND_OPTIONS if o.field == "port"), board
    return chosen[0] if chosen else (BACKEND_OPTIONS[0], None)


def _user_defaults():
    from hilbench.config import user_defaults

    try:
        return user_defaults()
    except HilbenchError as exc:
        raise pytest.UsageError(f"hilbench: {exc}") from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "hardware_timing: needs durations measured on a physical board; skipped on other backends",
    )
    _check_stopping(config)
    _COLLECTED.clear()
    try:
        kinds = [c.backend for c in backends_configs(config).values()] or [
            backend_config(config).backend
        ]
        if "emulate" in kinds:
            from hilbench.npu.ops import backend as _backend

            _backend.check_env()  # the emulator's NPU
    except HilbenchError as exc:
        raise pytest.UsageError(f"hilbench: {exc}") from None
    _check_trace_dir(config)
    if "qemu" in kinds:
        from hilbench.backend.qemu import QemuBackend

        try:
            QemuBackend.check_available()
        except HilbenchError as exc:
            raise pytest.UsageError(f"hilbench --qemu: {exc}") from None


def backend_config(config: pytest.Config) -> RunConfig:
    """The RunConfig skeleton the command-line options describe."""
    option, value = chosen_backend(config)
    fields = {option.field: value} if option.field else {}
    firmware = config.getoption("--fw")
    if firmware is not None:
        if option.backend not in ("sil", "qemu", "board"):
            raise pytest.UsageError(
                f"hilbench: --fw names the firmware of --sil, --qemu or --board, not of "
                f"{option.flag}"
            )
        fields["firmware"] = firmware
    baud = config.getoption("--baud")
    if baud is not None and option.backend != "board":
        raise pytest.UsageError(f"hilbench: --baud sets a board's speed, not {option.flag}'s")
    try:
        from hilbench.config import parse_baud

        fields["baud"] = parse_baud(baud) if baud is not None else _user_defaults().baud
        return RunConfig(
            backend=option.backend, link_faults=config.getoption("--link-faults"), **fields
        )
    except HilbenchError as exc:
        refused = str(exc)
    raise pytest.UsageError(f"hilbench: {refused}")  # not chained to the error above


_BACKEND = pytest.StashKey[Backend]()


@pytest.fixture(scope="session")
def hil_backend(pytestconfig: pytest.Config, request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The opened backend, shared by the whole session (one device, one connection). A
    board's moves from absent to training are logged (INFO, ``hilbench.board``) into the
    tests' captured log."""
    name = getattr(request, "param", None)  # --backends: this backend of the list
    if name is not None:
        backend = make_backend(backends_configs(pytestconfig)[name])
    else:
        backend = make_backend(backend_config(pytestconfig))
    pytestconfig.stash[_BACKEND] = backend
    board_log = logging.getLogger("hilbench.board")
    if backend.lifecycle is not None and board_log.level == logging.NOTSET:
        board_log.setLevel(logging.INFO)
    try:
        backend.open()
    except HilbenchError as exc:
        refused = str(exc)
    else:
        refused = ""
    if refused:  # outside the except block: the cause once, not chained to itself
        pytest.fail(f"hilbench: {refused}", pytrace=False)
    yield backend
    backend.close()


@pytest.fixture
def device(hil_backend: Backend) -> DeviceClient:
    """The connected device for the chosen backend; it has answered HELLO."""
    client = hil_backend.client
    assert client is not None
    try:
        client.hello()
    except HilbenchError as exc:
        refused = str(exc)
    else:
        return client
    pytest.fail(f"hilbench: {refused}", pytrace=False)  # one line, not chained


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("hardware_timing") is None:
        return
    if item_backend_config(item).backend != "board":
        pytest.skip("needs device-measured timing: run with --board=PORT on a physical board")


@pytest.fixture(scope="session")
def hil_trace_dir(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    option = pytestconfig.getoption("--trace-dir")
    path = Path(option) if option else tmp_path_factory.mktemp("traces")
    path.mkdir(parents=True, exist_ok=True)  # checked by pytest_configure
    return path


def _check_trace_dir(config: pytest.Config) -> None:
    """--trace-dir names a directory hilbench can write, or pytest stops with one line."""
    option = config.getoption("--trace-dir")
    if option is None:
        return
    if not option.strip():
        raise pytest.UsageError("hilbench: --trace-dir is empty: name a directory, or leave it out")
    path = Path(option)
    problem = ""
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            problem = "is not writable"
    except FileExistsError:
        problem = "exists and is not a directory"
    except OSError as exc:
        problem = f"cannot be created ({exc.strerror or exc})"
    if problem:
        raise pytest.UsageError(
            f"hilbench: --trace-dir {path} {problem}: choose a writable directory"
        )


@pytest.fixture
def trace_path(request: pytest.FixtureRequest, hil_trace_dir: Path) -> Path:
    """This test's trace file (one run group per zo_session call)."""
    return hil_trace_dir / trace_file_name(request.node.nodeid)


def trace_file_name(nodeid: str) -> str:
    """A test's trace file name: its id with what a file name cannot hold as ``_``, and for a
    parametrized test a hash of the whole id (``t[a/b]``, ``t[a_b]`` and ``t[a b]`` would
    otherwise share one file)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_")
    if "[" in nodeid:
        name += "-" + hashlib.sha256(nodeid.encode()).hexdigest()[:10]
    return f"{name}.h5"


def _keep_failed_traces(item: pytest.Item, runs: list[_Run]) -> dict[Path, Path]:
    """A failing test's traces copied out of pytest's temporary directory (which keeps the
    last three sessions) into a stable one; {} when --trace-dir chose where they are."""
    if item.config.getoption("--trace-dir"):
        return {}
    cache = getattr(item.config, "cache", None)
    keep = (
        cache.mkdir("hilbench-failed-traces")
        if cache is not None
        else Path(item.config.rootpath) / ".hilbench" / "failed-traces"
    )
    kept = {}
    for path in {entry.trace_path for entry in runs}:
        if not path.exists():
            continue
        try:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, keep / path.name)
        except OSError:
            continue
        kept[path] = keep / path.name
    return kept


def _view(config: pytest.Config) -> RunView:
    """A transient live panel below pytest's progress line, or nothing.

    The panel draws under the line pytest is writing and, when it goes, puts the cursor back
    at that line's end (LiveView's ``column``), so pytest's output is never overwritten. It is
    shown only where pytest owns the terminal: not with --no-live, not off a terminal, not in
    a pytest-xdist worker, and not with -s (the test's own output would land in it).
    """
    if config.getoption("--no-live") or hasattr(config, "workerinput"):
        return NullView()
    capman = config.pluginmanager.getplugin("capturemanager")
    reporter = config.pluginmanager.getplugin("terminalreporter")
    if capman is None or not capman.is_globally_capturing() or reporter is None:
        return NullView()
    with capman.global_and_fixture_disabled():  # capture suspended: pytest's own terminal
        if not sys.stdout.isatty():
            return NullView()
    from rich.console import Console

    writer = config.get_terminal_writer()
    return LiveView(
        Console(force_terminal=True),
        guard=capman.global_and_fixture_disabled,
        transient=True,
        column=lambda: writer.width_of_current_line,
    )


def _pct(value: float | None) -> str:
    return "not evaluated" if value is None else f"{value:.2%}"


@dataclass(frozen=True, repr=False)
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
    record: Callable[[str, object], None] | None = field(default=None, compare=False)

    def check(self, *limits: Any) -> list[Any]:
        """Judge ``limits`` on this run's trace (see the class docstring)."""
        from hilbench.trace.limits import Limit, check

        __tracebackhide__ = True
        for limit in limits:
            if not isinstance(limit, Limit):
                pytest.fail(
                    f"hilbench: check() takes Limit objects, not {type(limit).__name__} "
                    f'{limit!r}: write check(Limit("final_accuracy", low=0.5)) '
                    "(from hilbench.trace.limits import Limit)",
                    pytrace=False,
                )
        return check(self.trace, *limits, record=self.record, stacklevel=3)

    def __repr__(self) -> str:
        r = self.result
        replayed = ""
        if self.replay is not None:
            replayed = ", replay matches" if self.replay.matches else ", replay MISMATCH"
        return (
            f"<SessionOutcome run {r.run_id} of {r.trace_path}: accuracy "
            f"{_pct(r.final_accuracy)}, {r.forward_passes:,} forward passes{replayed}>"
        )


#: RunConfig settings the command line sets for every test (a test cannot pick another).
PLUGIN_SETTINGS = {
    "backend": "--emulate, --board=PORT or --qemu",
    "port": "--board=PORT",
    "baud": "--baud=RATE",
    "firmware": "the backend options",
    "trace": "--trace-dir=DIR (each test writes its own trace file)",
    "link_faults": "--link-faults=SPEC",
    # (time_limit_s and until: --time-limit and --until set them for every test; a test's win)
    "live": "--no-live",
}


@dataclass
class _Run:
    """One zo_session call of a test, for the failure section."""

    trace_path: Path
    runs_before: int  # runs the file held before this call
    outcome: SessionOutcome | None = None
    error: str = ""  # why the call raised, if it did
    parting: str = ""  # --backends: where this run parts from the same run on another backend


_RUNS = pytest.StashKey[list[_Run]]()


class ZoSession:
    """The ``zo_session`` fixture: ``zo_session(budget=4000, scheduler="fixed:2")`` trains on
    the test's device, replays the trace against the device's weights CRC and returns a
    SessionOutcome. Each call adds a run to the test's trace file."""

    def __init__(
        self, request: pytest.FixtureRequest, device: DeviceClient, trace_path: Path
    ) -> None:
        self._request = request
        self._device = device
        self._base = item_backend_config(request.node)
        self._backend_id = backend_id(request.node)
        self.trace_path = trace_path
        self.runs: list[_Run] = request.node.stash.setdefault(_RUNS, [])

    def _where(self) -> DeviceClient | Connection:
        """The session backend's connection when the test's device is its client (a board's
        place and lifecycle go into the run), else the device itself."""
        backend = self._request.config.stash.get(_BACKEND, None)
        connection = backend.connection if backend is not None else None
        if connection is not None and connection.client is self._device:
            return connection
        return self._device

    def _record(self, name: str, value: object) -> None:
        self._request.node.user_properties.append((name, value))

    def __call__(self, **overrides: Any) -> SessionOutcome:
        from hilbench import session
        from hilbench.trace import Trace
        from hilbench.trace.replay import replay

        __tracebackhide__ = True
        config = self._config({**stopping_defaults(self._request.config), **overrides})
        node = self._request.node  # the test, for grouping its runs across backends
        test = _test_key(node, self._backend_id) if self._backend_id else node.nodeid
        config = config.replace(extra={**config.extra, "pytest_test": test})
        entry = _Run(self.trace_path, _count_runs(self.trace_path))
        self.runs.append(entry)
        refused = ""
        try:
            result = session.run(config, view=_view(self._request.config), target=self._where())
        except HilbenchError as exc:  # the user's settings or setup: one line, as the CLI says it
            entry.error = f"{type(exc).__name__}: {exc}"
            refused = str(exc)
        except BaseException as exc:
            entry.error = f"{type(exc).__name__}: {exc}"
            raise
        if refused:  # outside the except block: not chained to the error
            if _count_runs(self.trace_path) == entry.runs_before:
                self.runs.remove(entry)  # no run written: the error says it all, no section
            pytest.fail(f"hilbench: zo_session(): {refused}", pytrace=False)
        trace = Trace.open(result.trace_path, run=result.run_id)
        for key in ("final_accuracy", "forward_passes", "steps"):
            self._record(f"hilbench.{key}", getattr(result, key))
        self._record("hilbench.trace", str(result.trace_path))
        # Invariant 2 for every trace the suite writes: rebuild the weights from the trace.
        replayed = replay(trace, head_data=session.head_data(trace))
        self._record("hilbench.replay", "match" if replayed.matches else "MISMATCH")
        entry.outcome = SessionOutcome(result, trace, replayed, record=self._record)
        if not replayed.matches:
            pytest.fail(f"hilbench: {replayed.message()}", pytrace=False)
        if self._backend_id is not None:  # --backends: the same call on the other backends
            entry.parting = _record_backend_run(
                self._request.node, self._backend_id, len(self.runs) - 1, trace
            )
            if entry.parting:
                pytest.fail(f"hilbench --backends: {entry.parting}", pytrace=False)
        return entry.outcome

    def _config(self, settings: dict[str, Any]) -> RunConfig:
        """The run's RunConfig; a setting it cannot take fails the test in one line."""
        __tracebackhide__ = True
        known = [f.name for f in dataclasses.fields(RunConfig) if f.name not in PLUGIN_SETTINGS]
        for name in settings:
            if name in PLUGIN_SETTINGS:
                pytest.fail(
                    f"hilbench: zo_session({name}=...) is not a test's to choose: it is the "
                    f"same for the whole pytest run. use {PLUGIN_SETTINGS[name]}",
                    pytrace=False,
                )
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                pytest.fail(
                    f"hilbench: zo_session() has no setting {name!r}{hint}. "
                    f"use one of: {', '.join(known)}",
                    pytrace=False,
                )
        try:
            return self._base.replace(trace=self.trace_path, **settings)
        except HilbenchError as exc:
            refused = str(exc)
        pytest.fail(f"hilbench: zo_session(): {refused}", pytrace=False)  # not chained

    def __repr__(self) -> str:
        info = self._device.info
        device = f" ({info.device_id})" if info is not None else ""
        n = len(self.runs)
        return (
            f"<zo_session on {self._base.backend}{device}, trace {self.trace_path}, "
            f"{n} run{'' if n == 1 else 's'}>"
        )


def _count_runs(path: Path) -> int:
    from hilbench.trace.reader import list_runs

    try:
        return len(list_runs(path)) if path.exists() else 0
    except HilbenchError:
        return 0  # not a trace (yet): the run itself will say what is wrong with the file


@pytest.fixture
def zo_session(request: pytest.FixtureRequest, device: DeviceClient, trace_path: Path) -> ZoSession:
    """Train on the test's device: ``zo_session(budget=4000, scheduler="fixed:2")``."""
    return ZoSession(request, device, trace_path)


# ---------------------------------------------------------------- a failing test's report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failing test that trained ends with a "hilbench" section: device, figures, events,
    the trace and the command that opens it. Passing tests get nothing."""
    report = yield
    runs = item.stash.get(_RUNS, None)
    if runs and report.failed and call.when == "call":
        text = failure_section(runs, _keep_failed_traces(item, runs))
        if text:
            report.sections.append(("hilbench", text))
    elif report.failed and call.when == "call":  # no run: what the device said, if anything
        text = device_log_section(item)
        if text:
            report.sections.append(("hilbench", text))
    if report.failed and call.when in ("setup", "call"):
        text = board_section(item)
        if text:
            report.sections.append(("hilbench board", text))
    return report


def board_section(item: pytest.Item) -> str:
    """The board a failing test used: its port and probe id, the stage it reached, its last
    moves and the last bytes its UART sent; "" for a test without a board."""
    if "hil_backend" not in getattr(item, "fixturenames", ()):
        return ""
    backend = item.config.stash.get(_BACKEND, None)
    life = backend.lifecycle if backend is not None else None
    if life is None:
        return ""
    return "\n".join(_row(label, text) for label, text in life.report())


def failure_section(runs: list[_Run], kept: dict[Path, Path] | None = None) -> str:
    """The hilbench section of a failing test: one block per run the test started; ``kept``:
    the copies of traces made to outlive pytest's temporary directory."""
    from hilbench.trace.reader import Trace, list_runs

    lines: list[str] = []
    device_line = ""
    for entry in runs:
        path = entry.trace_path
        try:
            ids = list_runs(path) if path.exists() else []
        except HilbenchError as exc:
            lines.append(_row("trace", f"{path} cannot be read: {exc}"))
            continue
        if entry.outcome is not None:
            trace = entry.outcome.trace
        elif len(ids) > entry.runs_before:
            try:
                trace = Trace.open(path, run=ids[entry.runs_before])
            except HilbenchError as exc:
                lines.append(_row("trace", f"{path} cannot be read: {exc}"))
                continue
        else:  # stopped before the run was written: the error says why
            lines.append(_row("no run", entry.error or "the run did not start"))
            continue
        here = _device_line(trace)
        if here != device_line:
            lines.append(_row("device", here))
            device_line = here
        lines.extend(_run_lines(trace, several=len(ids) > 1, shown=(kept or {}).get(path)))
        if entry.parting:
            lines.append(_row("backends", entry.parting))
    return "\n".join(lines)


SECTION_DEVICE_LINES = 5  # the device's last lines a failing test's section shows


def _device_said_lines(trace: Any) -> list[str]:
    """The device's last own words (LOG lines, console bytes) in a failing run's block."""
    from hilbench.trace.device_lines import format_said, last_lines

    shown, total = last_lines(trace, SECTION_DEVICE_LINES)
    if total > len(shown):
        shown = shown[-(SECTION_DEVICE_LINES - 1) :]
        return [_row("said", f"({total - len(shown)} earlier lines in the trace)")] + [
            _row("said", format_said(said)) for said in shown
        ]
    return [_row("said", format_said(said)) for said in shown]


def device_log_section(item: pytest.Item) -> str:
    """A failing test that used ``device`` without training: the device's last LOG lines
    and the bytes its port sent before its first frame, from the client."""
    names = getattr(item, "fixturenames", ())
    if "device" not in names or "zo_session" in names:  # a zo_session test: its runs say it
        return ""
    backend = item.config.stash.get(_BACKEND, None)
    client = getattr(backend, "client", None) if backend is not None else None
    log = getattr(client, "device_log", None)
    if log is None:
        return ""
    from hilbench.client.device_log import console_detail

    lines = []
    if log.raw_before_hello:
        lines.append(_row("said", console_detail(log.raw_before_hello)))
    last = log.last(SECTION_DEVICE_LINES)
    if log.received > len(last):
        lines.append(_row("said", f"({log.received - len(last)} earlier lines not shown)"))
    lines += [_row("said", str(line)) for line in last]
    return "\n".join(lines)


def _row(label: str, text: str) -> str:
    return f"{label:<9} {text}"


def _device_line(trace: Any) -> str:
    attrs, config = trace.attrs, trace.config
    backend = str(attrs.get("backend") or "?")
    if backend == "board" and config.get("port"):
        backend += f" {config['port']}"
    device = attrs.get("device_id") or "(no HELLO answer recorded)"
    details = [f"firmware {attrs['firmware']}"] if attrs.get("firmware") else []
    if attrs.get("protocol_version") is not None:
        details.append(f"protocol {attrs['protocol_version']}")
    return f"{backend}: {device}" + (f" ({', '.join(details)})" if details else "")


def _run_lines(trace: Any, *, several: bool, shown: Path | None = None) -> list[str]:
    final, config = trace.final, trace.config
    what = ", ".join(
        str(part)
        for part in (
            f"{trace.attrs.get('model', '?')} on {trace.attrs.get('dataset', '?')}",
            config.get("scheduler"),
            f"seed {trace.attrs.get('seed', '?')}",
        )
        if part
    )
    losses = []
    if final.loss is not None:
        losses.append(f"{final.loss:.4f} nats (test)")
    if final.train_loss is not None:
        losses.append(f"{final.train_loss:.4f} (train)")
    figures = _pct(final.accuracy)
    tests = trace.evals[trace.evals["split"] == "test"]
    if trace.status != "complete" and len(tests):  # a run cut short: its last evaluation
        figures += f" at {int(tests['forward_passes'][-1]):,} forward passes"
    figures += f"  loss {', '.join(losses)}" if losses else ""
    budget = config.get("budget")
    of_budget = f" of {budget:,}" if isinstance(budget, int) else ""
    counts = trace.event_counts()
    events = ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())) or "none"
    lines = [
        _row(f"run {trace.run_id}", f"{trace.status}: {what}"),
        _row("accuracy", figures),
        _row("steps", f"{final.steps:,} ({final.forward_passes:,}{of_budget} forward passes)"),
        _row("events", events),
    ]
    if trace.status in ("failed", "interrupted") and len(trace.events):
        last = trace.events[-1]
        if last["kind"] in ("error", "fault", "interrupt"):  # fault: in older traces
            lines.append(_row("ended by", str(last["detail"]).splitlines()[0][:300]))
    path = shown or trace.path
    command = f"hilbench report {shlex.quote(str(path))}"
    if several:
        command += f" --run {trace.run_id}"
    lines.append(_row("trace", str(path)))
    if shown is not None:
        lines.append(
            _row(
                "kept",
                "copied out of pytest's temporary directory, which keeps 3 sessions; "
                "--trace-dir=DIR writes every test's trace there instead",
            )
        )
    lines.append(_row("open it", command))
    lines.extend(_device_said_lines(trace))  # last: the device's own words
    return lines


# ---------------------------------------------------------------- --backends, --time-limit


def parse_backends(text: str) -> dict[str, dict[str, str]]:
    """``emulate,sil,board=/dev/ttyACM0,labgrid:rack-1`` -> {id: RunConfig fields}: a backend
    name, ``board=PORT``, or a board's port given bare (a farm place, a device path, a URL)."""
    out: dict[str, dict[str, str]] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, eq, value = entry.partition("=")
        if entry in BACKEND_NAMES and not BACKEND_NAMES[entry].port:
            fields = {"backend": entry}
        elif eq and name == "board" and value.strip():
            fields = {"backend": "board", "port": value.strip()}
        elif entry.startswith(("labgrid:", "map:", "socket://", "rfc2217://", "/dev/", "COM")):
            fields = {"backend": "board", "port": entry}
        else:
            names = ", ".join(BACKEND_NAMES)
            raise pytest.UsageError(
                f"hilbench: --backends names {entry!r}, which is no backend: use {names}, "
                "board=PORT, or a board's port (labgrid:PLACE, map:FILE, /dev/ttyACM0)"
            )
        if entry in out:
            raise pytest.UsageError(f"hilbench: --backends names {entry!r} twice")
        out[entry] = fields
    if not out:
        raise pytest.UsageError("hilbench: --backends is empty: name backends, e.g. emulate,sil")
    return out


_BACKENDS = pytest.StashKey[dict[str, RunConfig]]()


def backends_configs(config: pytest.Config) -> dict[str, RunConfig]:
    """--backends: each backend's RunConfig skeleton by its id ({} without the option)."""
    cached = config.stash.get(_BACKENDS, None)
    if cached is not None:
        return cached
    text = config.getoption("--backends")
    if text is None:
        return {}
    given = [o.flag for o in BACKEND_OPTIONS if config.getoption(o.flag) not in (None, False)]
    if given:
        raise pytest.UsageError(
            f"hilbench: --backends names every backend of the session; leave out {given[0]}"
        )
    if config.getoption("--fw") is not None:
        raise pytest.UsageError(
            "hilbench: --fw names one backend's firmware; with --backends each backend builds "
            "its own (leave out --fw, or run that backend alone)"
        )
    out = {}
    baud = config.getoption("--baud")
    for name, fields in parse_backends(text).items():
        try:
            from hilbench.config import parse_baud

            speed = parse_baud(baud) if baud is not None else _user_defaults().baud
            out[name] = RunConfig(
                link_faults=config.getoption("--link-faults"), baud=speed, **fields
            )
        except HilbenchError as exc:
            raise pytest.UsageError(f"hilbench --backends {name}: {exc}") from None
    config.stash[_BACKENDS] = out
    return out


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """--backends: a test reaching the device runs once per backend (``test_x[sil]``)."""
    configs = backends_configs(metafunc.config)
    if not configs or "hil_backend" not in metafunc.fixturenames:
        return
    names = list(configs)
    metafunc.parametrize("hil_backend", names, indirect=True, scope="session", ids=names)


def backend_id(item: pytest.Item) -> str | None:
    """The --backends id an item runs on, None without --backends."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    return callspec.params.get("hil_backend")


def item_backend_config(item: pytest.Item) -> RunConfig:
    """The RunConfig skeleton of the backend this test runs on."""
    name = backend_id(item)
    if name is not None:
        return backends_configs(item.config)[name]
    return backend_config(item.config)


def _check_stopping(config: pytest.Config) -> None:
    try:
        stopping_defaults(config)
    except HilbenchError as exc:
        raise pytest.UsageError(f"hilbench: {exc}") from None


def stopping_defaults(config: pytest.Config) -> dict[str, Any]:
    """zo_session settings --time-limit and --until give every test."""
    from hilbench.config import parse_duration, parse_until

    out: dict[str, Any] = {}
    limit = config.getoption("--time-limit")
    if limit is not None:
        out["time_limit_s"] = parse_duration(limit)
    until = config.getoption("--until")
    if until is not None:
        parse_until(until)
        out["until"] = until
    return out


@dataclass(frozen=True)
class _BackendRun:
    """One zo_session call of a test on one backend of --backends."""

    test: str  # the test's id with the backend's part as "*"
    call: int
    backend: str
    trace: str
    run_id: str


_BACKEND_RUNS = pytest.StashKey[list[_BackendRun]]()
_PARTINGS = pytest.StashKey[list[str]]()
#: Settings a test's runs on two backends may differ in and still be compared.
_BACKEND_FIELDS = ("backend", "port", "baud", "firmware", "trace", "link_faults")


def _test_key(item: pytest.Item, backend: str) -> str:
    return (
        item.nodeid.replace(f"[{backend}]", "[*]")
        .replace(f"[{backend}-", "[*-")
        .replace(f"-{backend}]", "-*]")
    )


def _record_backend_run(item: pytest.Item, backend: str, call: int, trace: Any) -> str:
    """Record a run for the comparison at the end and compare it now with the same call of
    the same test on the backends this process ran before; the parting, or ""."""
    import json

    run = _BackendRun(_test_key(item, backend), call, backend, str(trace.path), trace.run_id)
    item.user_properties.append(("hilbench.backend_run", json.dumps(dataclasses.asdict(run))))
    earlier = [
        r
        for r in item.config.stash.setdefault(_BACKEND_RUNS, [])
        if (r.test, r.call) == (run.test, run.call)
    ]
    item.config.stash[_BACKEND_RUNS].append(run)
    if not earlier:
        return ""
    return _compare_group([*earlier, run])[1]


def _compare_group(runs: list[_BackendRun]) -> tuple[str, str]:
    """(a line saying the runs agree, "") or ("", the first parting) for one test's call."""
    from hilbench.trace import Trace
    from hilbench.trace.parting import agreement_line, compare_runs

    traces = {}
    for r in runs:
        try:
            traces[r.backend] = Trace.open(r.trace, r.run_id)
        except HilbenchError as exc:
            return "", f"the run on {r.backend} cannot be read ({exc})"
    configs = [
        {k: v for k, v in t.config.items() if k not in _BACKEND_FIELDS} for t in traces.values()
    ]
    if any(c != configs[0] for c in configs[1:]):
        return f"not compared: its runs' settings differ between {', '.join(traces)}", ""
    partings = compare_runs(traces)
    if partings:
        return "", "; ".join(str(p) for p in partings)
    return agreement_line(traces), ""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect --backends runs from every report (from xdist workers too, in the controller)."""
    if report.when != "call":
        return
    for name, value in report.user_properties:
        if name == "hilbench.backend_run":
            _COLLECTED.append(value)


_COLLECTED: list[str] = []  # this process's reports' backend runs (JSON), in report order


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """--backends: compare every test's runs across backends (in the controller under xdist);
    a parting fails the session and is listed in the summary."""
    import json

    config = session.config
    if hasattr(config, "workerinput") or not backends_configs(config):
        return
    order = list(backends_configs(config))
    groups: dict[tuple[str, int], list[_BackendRun]] = {}
    for text in dict.fromkeys(_COLLECTED):
        run = _BackendRun(**json.loads(text))
        groups.setdefault((run.test, run.call), []).append(run)
    lines, partings = [], []
    for (test, call), runs in sorted(groups.items()):
        runs.sort(key=lambda r: order.index(r.backend) if r.backend in order else len(order))
        label = test + (f" (run {call + 1})" if call else "")
        if len(runs) < 2:
            lines.append(f"{label}: only on {runs[0].backend}")
            continue
        same, parted = _compare_group(runs)
        if parted:
            partings.append(f"{label}: {parted}")
            lines.append(f"{label}: PARTS: {parted}")
        else:
            lines.append(f"{label}: {same}")
    config.stash[_PARTINGS] = lines
    if partings and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    lines = config.stash.get(_PARTINGS, None)
    if not lines:
        return
    terminalreporter.section("hilbench: the same test on every backend")
    for line in lines:
        terminalreporter.line(line, red="PARTS" in line)
