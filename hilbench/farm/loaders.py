"""Putting firmware on a farm board: one loader function per kind of device, pluggable.

A place (or a board of a board map) names its loader with ``kind`` (the ``HilbenchDevice``
resource of a labgrid exporter, or a board map entry). ``load(ctx)`` returns a ``Loaded``
(the image's hash for the trace, and how to stop what was started); hilbench calls it after
acquiring the board and before connecting, and ``Loaded.stop()`` before releasing it.

Built in:

- ``none``: the device already runs its firmware (a board flashed by someone else, a
  ``hilbench emulate --listen`` twin); nothing is loaded.
- ``sil``: start the SIL program (``hilbench-sil --listen HOST:PORT``) at the place's serial
  address: for the SIL, loading the firmware is starting the program. The address must be
  on this host.
- ``emulate``: start ``hilbench emulate --listen HOST:PORT`` there (a twin as a farm worker).
- ``command``: run the place's ``load`` command (and ``unload`` when released), with
  ``{image} {probe} {host} {port} {place}`` filled in, e.g. ``ssh {host} pyocd load --uid
  {probe} {image}`` on the exporter's host, or a remote probe through ``pyocd server``.
- ``pyocd``: the board loader (hilbench/board/loader.py, the one ``hilbench load`` and
  ``--board /dev/ttyACM0`` use) puts the ELF into the board's RAM and starts it with a core
  reset, through pyOCD on the probe ``probe`` when the probe hangs on this host, through a GDB
  remote stub on the exporter's host (``gdb: HOST:PORT``: ``pyocd gdbserver --uid PROBE``,
  OpenOCD, QEMU's ``-gdb``), or through ``pyocd server`` there (``pyocd_server: HOST:PORT``,
  pyOCD's remote probe ``remote:HOST:PORT``). A board already running the build is not loaded
  again; the firmware keeps running when the board is released (see :func:`_load_pyocd`).

``register(kind, fn)`` adds or replaces a loader (a plug-in for another tool or board).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hilbench.errors import HilbenchError, LinkError
from hilbench.farm.context import LoadContext, Loaded, file_hash, is_local
from hilbench.farm.pyocd_loader import load_board

LOAD_TIMEOUT_S = 300.0
Loader = Callable[[LoadContext], Loaded]
_LOADERS: dict[str, Loader] = {}


def register(kind: str, loader: Loader) -> None:
    """Make ``loader`` the one for places of ``kind`` (replacing any before it)."""
    _LOADERS[kind] = loader


def kinds() -> list[str]:
    return sorted(_LOADERS)


def load(kind: str, ctx: LoadContext) -> Loaded:
    """Run the loader of ``kind`` on ``ctx``; a HilbenchError names an unknown kind."""
    loader = _LOADERS.get(kind)
    if loader is None:
        raise HilbenchError(
            f"place {ctx.place} names loader kind {kind!r}, which this hilbench does not have",
            f"use one of {', '.join(kinds())} in its HilbenchDevice resource (docs/farm.md), "
            "or register one with hilbench.farm.loaders.register",
        )
    return loader(ctx)


def _load_none(ctx: LoadContext) -> Loaded:
    given = str(ctx.params.get("firmware_hash", ""))
    return Loaded(firmware_hash=given, detail="nothing to load: the device runs its firmware")


def _local_only(ctx: LoadContext, what: str) -> None:
    if not is_local(ctx.serial_host):
        raise LinkError(
            f"place {ctx.place}: the {what} loader starts the program on this host, and the "
            f"place's serial port is on {ctx.serial_host}",
            "give the place kind 'none' (a program already running there) or a 'command' loader",
        )


def _start(argv: list[str], name: str, ctx: LoadContext) -> Any:
    from hilbench.launch.process import FirmwareProcess

    process = FirmwareProcess(argv, name=f"{name} of place {ctx.place}")
    first = process.start()
    if "listening" not in first:
        process.stop()
        raise LinkError(
            f"{name} of place {ctx.place} printed {first!r} instead of where it listens",
            "check the place's HilbenchDevice settings (docs/farm.md)",
        )
    return process


def _load_sil(ctx: LoadContext) -> Loaded:
    from hilbench.launch.sil import sil_binary

    _local_only(ctx, "sil")
    binary = sil_binary(ctx.image or ctx.params.get("image") or None)
    argv = [str(binary), "--listen", f"{ctx.serial_host}:{ctx.serial_port}"]
    argv += ["--device-id", str(ctx.params.get("device_id") or f"sil-{ctx.place}")]
    argv += shlex.split(str(ctx.params.get("options", "")))
    process = _start(argv, "the SIL firmware", ctx)
    return Loaded(file_hash(binary), f"started {binary}", process.stop)


def _load_emulate(ctx: LoadContext) -> Loaded:
    _local_only(ctx, "emulate")
    argv = [sys.executable, "-m", "hilbench", "emulate", "--listen"]
    argv.append(f"{ctx.serial_host}:{ctx.serial_port}")
    process = _start(argv, "the emulator", ctx)
    return Loaded("", "started hilbench emulate", process.stop)


def _fill(template: str, ctx: LoadContext, image: str) -> list[str]:
    values = {
        "image": image,
        "probe": ctx.probe,
        "host": ctx.host,
        "port": str(ctx.serial_port),
        "place": ctx.place,
    }
    try:
        return [part.format(**values) for part in shlex.split(template)]
    except (KeyError, IndexError, ValueError) as exc:
        raise HilbenchError(
            f"place {ctx.place}: the loader command {template!r} has a bad placeholder ({exc})",
            "use only {image} {probe} {host} {port} {place}",
        ) from None


def _run(argv: list[str], ctx: LoadContext, what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=LOAD_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LinkError(
            f"place {ctx.place}: the {what} command {shlex.join(argv)} failed: {exc}",
            "check the command in the place's HilbenchDevice resource",
        ) from None
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-4:]) or "no output"
        raise LinkError(
            f"place {ctx.place}: {shlex.join(argv)} exited {done.returncode}: {tail}",
            "check the probe and the command in the place's HilbenchDevice resource",
        )


def _load_command(ctx: LoadContext) -> Loaded:
    template = str(ctx.params.get("load", "")).strip()
    if not template:
        raise HilbenchError(
            f"place {ctx.place} has loader kind 'command' and no load command",
            "set load: in its HilbenchDevice resource, e.g. 'ssh {host} pyocd load --uid "
            "{probe} {image}'",
        )
    image = ctx.image or str(ctx.params.get("image", ""))
    _run(_fill(template, ctx, image), ctx, "load")
    unload = str(ctx.params.get("unload", "")).strip()
    digest = file_hash(image) if image and Path(image).is_file() else ""
    stop = (lambda: _run(_fill(unload, ctx, image), ctx, "unload")) if unload else (lambda: None)
    return Loaded(digest, f"ran {template}", stop)


register("none", _load_none)
register("sil", _load_sil)
register("emulate", _load_emulate)
register("command", _load_command)
register("pyocd", load_board)  # through pyOCD or a GDB stub (hilbench/farm/pyocd_loader.py)
