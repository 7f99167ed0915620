"""The ``pyocd`` loader kind: a farm board loaded by the board loader, as a local board is.

The same :func:`hilbench.board.loader.load` that ``hilbench load`` and ``--board /dev/ttyACM0``
run (halt, write the ELF's segments, VTOR, a core reset, resume, HELLO; skipped when HELLO
already names the ELF's build) drives the place's core through one of three debuggers:

- ``gdb: HOST:PORT`` (or ``PORT`` on the probe's host): a GDB remote stub on the exporter's
  host -- ``pyocd gdbserver --uid PROBE --port PORT`` per probe, OpenOCD, QEMU's ``-gdb``;
- ``pyocd_server: HOST:PORT`` (or ``PORT``): ``pyocd server --uid PROBE --port PORT`` there,
  reached as pyOCD's remote probe ``remote:HOST:PORT``;
- neither: pyOCD on the probe ``probe`` itself, which must hang on this host.

``machine`` is ``stm32n6`` (default; the ELF must fit its development-boot RAM) or ``an547``
(QEMU's MPS3 AN547). The image is the run's ``--fw``, else the place's ``image``, else the
checkout's build for the machine (built with make). The serial port is the place's
(``ctx.port_url``), opened before the core resumes; nothing is reset after the load but by
the loader's core reset, and releasing the board leaves its firmware running, so the next
acquisition finds the build there and loads nothing. The hash recorded is the board backend's:
``build-id:<the build id HELLO names>``.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

from hilbench.board import elfimage
from hilbench.board.debug import DebugLinkError, DebugTarget
from hilbench.errors import ConfigError, HilbenchError
from hilbench.farm.context import LoadContext, Loaded, is_local
from hilbench.link.serial_port import close_socket_now

log = logging.getLogger("hilbench.board")
MACHINES = ("stm32n6", "an547")
DEFAULT_PYOCD_SERVER_PORT = 5555  # `pyocd server`'s default
CONNECT_TIMEOUT_S = 5.0
Connect = Callable[[int], DebugTarget]


def load_board(ctx: LoadContext) -> Loaded:
    """Load the place's board through the board loader (see the module doc)."""
    from hilbench.board.loader import FREQUENCIES, load
    from hilbench.board.ports import open_board_port
    from hilbench.board.stm32n6 import DEFAULT_BAUD

    machine = _machine(ctx)
    connect, frequencies, via = debugger(ctx)
    image = elfimage.read_image(_elf(ctx, machine), _PROFILES[machine])
    board = f"place {ctx.place} (probe {ctx.probe or 'unnamed'} via {via})"

    def step(name: str, seconds: float) -> None:
        log.info("%s: %s (%.3f s)", board, name, seconds)

    port = open_board_port(ctx.port_url, ctx.baud or DEFAULT_BAUD)
    try:
        result = load(
            image,
            connect,
            port,
            board=board,
            frequencies=frequencies or FREQUENCIES,
            on_step=step,
        )
    finally:
        _close_now(port)  # hilbench connects again right away: no pause after the close
    firmware_hash = f"build-id:{image.image_id}"
    if result.skipped:
        detail = f"{board} already runs build {image.image_id}: nothing loaded"
    else:
        speed = f" at {result.frequency / 1e6:g} MHz SWD" if result.frequency else ""
        detail = (
            f"{board}: loaded {result.bytes_written} bytes of {image.path.name} (build "
            f"{image.image_id}){speed} in {sum(t for _, t in result.steps):.2f} s"
        )
        _check_build(ctx, image, result.info.firmware)
    log.info("%s", detail)
    return Loaded(firmware_hash, detail, lambda: None)  # the firmware keeps running


def debugger(ctx: LoadContext) -> tuple[Connect, tuple[int, ...], str]:
    """How the place's core is reached: ``connect(frequency)``, the SWD frequencies to try
    (empty: the loader's), and a few words for messages."""
    gdb = str(ctx.params.get("gdb", "")).strip()
    server = str(ctx.params.get("pyocd_server", "")).strip()
    if gdb and server:
        raise ConfigError(
            f"place {ctx.place} gives both gdb and pyocd_server",
            "keep one: gdb: HOST:PORT (a GDB stub) or pyocd_server: HOST:PORT (pyocd server)",
        )
    if gdb:
        host, port = _address(ctx, "gdb", gdb, None)
        return _gdb_connect(ctx, host, port), (0,), f"the GDB stub {host}:{port}"
    from hilbench.board.pyocd_target import PyocdTarget

    if server:
        host, port = _address(ctx, "pyocd_server", server, DEFAULT_PYOCD_SERVER_PORT)
        uid = f"remote:{host}:{port}"

        def connect_server(hz: int) -> DebugTarget:
            _reachable(ctx, "pyocd server", host, port, f"pyocd server --uid {ctx.probe}")
            return PyocdTarget.connect(uid, hz)

        return connect_server, (), f"pyocd server {host}:{port}"
    if not ctx.probe:
        raise ConfigError(
            f"place {ctx.place} loads through pyOCD and names no probe",
            "set probe: to the ST-LINK's serial number (`pyocd list` on its host), or "
            "gdb: HOST:PORT for a GDB stub (docs/farm.md)",
        )
    if ctx.host and not is_local(ctx.host):
        raise ConfigError(
            f"place {ctx.place}: probe {ctx.probe} hangs on {ctx.host}, and pyOCD reaches "
            "only the probes of this host",
            f"run `pyocd gdbserver --uid {ctx.probe} --port 3333` on {ctx.host} and give the "
            f"place gdb: {ctx.host}:3333, or `pyocd server --uid {ctx.probe}` there and "
            f"pyocd_server: {ctx.host}:{DEFAULT_PYOCD_SERVER_PORT} (docs/farm.md)",
        )
    probe = ctx.probe
    return (lambda hz: PyocdTarget.connect(probe, hz)), (), f"pyOCD on {probe}"


def _gdb_connect(ctx: LoadContext, host: str, port: int) -> Connect:
    """Connect to the stub; a stub that is not there is one line naming what to start (not
    a probe error worth a retry: nothing was written)."""
    from hilbench.board import gdbremote

    def connect(_hz: int) -> DebugTarget:
        try:
            return gdbremote.GdbRemoteTarget(host, port)
        except DebugLinkError as exc:
            raise HilbenchError(
                f"place {ctx.place}: {exc.cause}; nothing was loaded",
                f"start the GDB server for probe {ctx.probe or '(its probe)'} on {host} "
                f"(`pyocd gdbserver --uid {ctx.probe or 'PROBE'} --port {port}`, or OpenOCD), "
                "or fix the place's gdb setting (docs/farm.md)",
            ) from None

    return connect


def _reachable(ctx: LoadContext, what: str, host: str, port: int, command: str) -> None:
    """A TCP connection to ``host:port`` opens (a server there), else one line."""
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise HilbenchError(
            f"place {ctx.place}: cannot reach the {what} at {host}:{port} "
            f"({exc.strerror or exc}); nothing was loaded",
            f"start `{command} --port {port}` on {host}, or fix the place's settings "
            "(docs/farm.md)",
        ) from None


def _address(ctx: LoadContext, key: str, value: str, default: int | None) -> tuple[str, int]:
    """HOST:PORT, or PORT on the probe's host (``ctx.host``, else the serial port's)."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    host = host.strip("[]") or ctx.host or ctx.serial_host or "127.0.0.1"
    if not port and default is not None:
        port = str(default)
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"place {ctx.place}: {key} {value!r} is not HOST:PORT",
            f"write e.g. {key}: benchpc:{default or 3333} (or the port alone on the probe's host)",
        )
    return host, int(port)


def _machine(ctx: LoadContext) -> str:
    machine = str(ctx.params.get("machine", "") or "stm32n6").strip().lower()
    if machine not in MACHINES:
        raise ConfigError(
            f"place {ctx.place} names machine {machine!r}",
            f"use one of {', '.join(MACHINES)} (stm32n6: an STM32N6570-DK, an547: QEMU's MPS3)",
        )
    return machine


_PROFILES = {"stm32n6": elfimage.STM32N6, "an547": elfimage.AN547}


def _elf(ctx: LoadContext, machine: str):
    given = ctx.image or str(ctx.params.get("image", "") or "") or None
    if machine == "an547":
        from hilbench.launch.qemu import firmware_elf as an547_elf

        return an547_elf(given)
    from hilbench.board.firmware import firmware_elf
    from hilbench.board.stm32n6 import DEFAULT_BAUD

    return firmware_elf(given, ctx.baud if ctx.baud and ctx.baud != DEFAULT_BAUD else None)


def _check_build(ctx: LoadContext, image: elfimage.FirmwareImage, firmware: str) -> None:
    """After a load, HELLO must name the build just written (else every acquisition would
    load it again, or another firmware answers on the place's serial port)."""
    from hilbench.board.stm32n6 import build_id_in

    said = build_id_in(firmware)
    if said != image.image_id:
        raise HilbenchError(
            f"place {ctx.place}: loaded build {image.image_id} of {image.path.name}, and the "
            f"firmware answering on {ctx.port_url} says {firmware!r}",
            "check that the place's serial port belongs to the board its debugger loads, and "
            "that the ELF is a hilbench firmware",
        )


def _close_now(port: object) -> None:

    close_socket_now(port)
    close = getattr(port, "close", None)
    if close is not None:
        close()
