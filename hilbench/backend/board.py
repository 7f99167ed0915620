"""The physical board as a backend: ``--board`` names it by port, probe serial or ``auto``; the
firmware (``--fw ELF``, default the checkout's stm32n6 build) is loaded when the board does not
already run that build, then the session goes on over the ST-LINK's virtual COM port.

``$HILBENCH_BOARD_PRE`` and ``$HILBENCH_BOARD_POST`` are shell commands run before the board
is opened (a power cycle through a USB hub or a relay: ``uhubctl -a cycle -p 2``) and after it
is closed, with ``{port}`` and ``{probe}`` replaced; a failing hook is one line.

Each step of the board's way from absent to ready (find it, open its port, check the running
build, connect the probe, halt, write, reset, resume, HELLO) is timed and logged on the
``hilbench.board`` logger, which pytest shows with a failing test; every error names the board
(port and probe id). The board's stage (hilbench/board/lifecycle.py) goes absent -> loaded ->
ready here, and back to absent on close; the connection carries it (``Connection.lifecycle``) so a
run moves it on, with the last bytes the board's UART sent for a failure's report.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import time
from collections.abc import Callable

from hilbench.backend.base import Backend, Connection
from hilbench.board.debug import DebugTarget
from hilbench.board.elfimage import read_image
from hilbench.board.firmware import firmware_elf
from hilbench.board.lifecycle import Lifecycle, Stage
from hilbench.board.loader import TailPort, load
from hilbench.board.ports import BoardRef, is_port_spec, list_ports, open_board_port, resolve_board
from hilbench.board.pyocd_target import PyocdTarget
from hilbench.board.stage import DebugStager, probe_stager
from hilbench.board.stm32n6 import build_id_in
from hilbench.client.events import Step, Transfer
from hilbench.errors import HilbenchError
from hilbench.link.faults import FaultSpec
from hilbench.link.serial_port import DEFAULT_BAUD

log = logging.getLogger("hilbench.board")
HOOKS = {"pre": "HILBENCH_BOARD_PRE", "post": "HILBENCH_BOARD_POST"}
HOOK_TIMEOUT_S = 120


def run_hook(which: str, board: BoardRef) -> float | None:
    """Run the ``pre`` or ``post`` hook if one is set; its duration, or None."""
    command = os.environ.get(HOOKS[which], "").strip()
    if not command:
        return None
    line = command.replace("{port}", shlex.quote(board.port))
    line = line.replace("{probe}", shlex.quote(board.probe_id or ""))
    t0 = time.monotonic()
    try:
        done = subprocess.run(
            line, shell=True, capture_output=True, text=True, timeout=HOOK_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise HilbenchError(
            f"{HOOKS[which]} did not finish in {HOOK_TIMEOUT_S} s: {line}",
            f"fix the command, or unset {HOOKS[which]}",
        ) from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()
        raise HilbenchError(
            f"{HOOKS[which]} failed (exit {done.returncode}) for {board}: "
            f"{tail[-1] if tail else 'no output'}",
            f"fix the command ({line}), or unset {HOOKS[which]}",
        )
    return time.monotonic() - t0


def wants_board_backend(spec: str, firmware: str | None = None) -> bool:
    """Whether ``--board spec`` is a physical board to load (auto, a probe serial, an ST-LINK's
    port, or any port with --fw) rather than a plain serial link (a pty, socket://)."""
    spec = spec.strip()
    if not spec:
        return False
    if spec == "auto" or not is_port_spec(spec):
        return True
    if "://" in spec:
        return False
    if firmware is not None:
        return True
    real = os.path.realpath(spec)
    return any(p.stlink and os.path.realpath(p.device) == real for p in list_ports())


class BoardBackend(Backend):
    """A board reached through its ST-LINK: port found, firmware loaded if needed, HELLO."""

    kind = "board"

    def __init__(
        self,
        spec: str,
        faults: FaultSpec | None = None,
        *,
        baud: int = DEFAULT_BAUD,
        firmware: str | None = None,
        probe: str | None = None,
        connect: Callable[[str, int], DebugTarget] | None = None,
        upload: str = "uart",
    ) -> None:
        super().__init__(faults)
        self.upload = upload  # "probe": model and data through the probe (board/stage.py)
        self.spec = spec
        self.baud = baud
        self.firmware = firmware
        self.probe = probe
        self.connect = connect  # (probe id, SWD Hz) -> DebugTarget; default pyOCD
        self.board: BoardRef | None = None
        self.steps: list[tuple[str, float]] = []  # (name, seconds) of every step so far
        self.events.step.subscribe(self._record_step)  # the steps list and the board's log
        self.loaded: bool | None = None  # None: nothing to load with (no probe)
        self.lifecycle = Lifecycle(spec, tail=self._tail)
        self._port: TailPort | None = None

    def _tail(self) -> bytes:
        return bytes(self._port.tail) if self._port is not None else b""

    def _step(self, name: str, seconds: float) -> None:
        self.events.step.emit(Step(name, seconds))

    def _record_step(self, step: Step) -> None:
        self.steps.append((step.name, step.seconds))
        log.info("%s: %s (%.3f s)", self.board or self.spec, step.name, step.seconds)

    def _load_progress(self, done: int, total: int) -> None:
        self.events.load.emit(Transfer(done, total))

    def open(self) -> Connection:
        life = self.lifecycle
        with life.moving_to(Stage.LOADED) as move:
            move.detail = self._find_and_load()
        assert self._port is not None and self.board is not None
        try:
            with life.moving_to(Stage.READY, "HELLO"):
                connection = self._attach(self._port, name=str(self.board))
        except HilbenchError:
            self._port.close()
            raise
        # the board's identity, which session.run writes into the trace (as a farm board's)
        info = connection.client.info
        build = build_id_in(info.firmware) if info else None
        connection.location = {
            "probe_id": self.board.probe_id or "",
            "firmware_hash": f"build-id:{build}" if build else "",
            "serial_url": self.board.port,
        }
        connection.lifecycle = life
        connection.loaded = self.loaded
        if self.upload == "probe" and self.board.probe_id:
            connection.client.stager = self._stager(self.board.probe_id)
        return connection

    def _stager(self, probe_id: str) -> DebugStager:
        """Staged uploads through this board's probe (the loader's connect, at 4 MHz)."""
        if self.connect is None:
            return probe_stager(probe_id)
        connect = self.connect
        return DebugStager(lambda: connect(probe_id, 4_000_000), name=f"probe {probe_id}",
                           halt=False)  # fmt: skip

    def _find_and_load(self) -> str:
        """Find the board, open its port, load the firmware unless it runs it: what was done."""
        t0 = time.monotonic()
        self.board = board = resolve_board(self.spec, self.probe)
        self.lifecycle.board = str(board)
        self._step("find the board", time.monotonic() - t0)
        hook = run_hook("pre", board)
        if hook is not None:
            self._step(f"{HOOKS['pre']} hook", hook)
        t0 = time.monotonic()
        # kept from here on: what the board says while loading and while tests run
        self._port = port = TailPort(open_board_port(board.port, self.baud))
        self._step("open its port", time.monotonic() - t0)
        if board.probe_id is None:
            return "no probe: the firmware already there"
        try:
            image = read_image(firmware_elf(self.firmware))
            probe_id = board.probe_id
            connect = self.connect or PyocdTarget.connect
            result = load(
                image,
                lambda hz: connect(probe_id, hz),
                port,
                board=str(board),
                progress=self._load_progress if self.events.load else None,
                on_step=self._step,
            )
        except HilbenchError:
            port.close()
            raise
        self.loaded = not result.skipped
        if result.skipped:
            return f"already runs build {image.image_id}"
        return f"build {image.image_id}, {result.bytes_written} bytes"

    def close(self) -> None:
        t0 = time.monotonic()
        super().close()
        if self.lifecycle.stage is not Stage.ABSENT:
            self.lifecycle.enter(Stage.ABSENT, time.monotonic() - t0, "closed")
        if self.board is not None:
            board, self.board = self.board, None
            hook = run_hook("post", board)
            if hook is not None:
                self._step(f"{HOOKS['post']} hook", hook)
