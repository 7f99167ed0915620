"""pyOCD's target API behind the loader's :class:`~hilbench.board.debug.DebugTarget`, and the
probes pyOCD sees.

pyOCD has no STM32N6 target and the CMSIS pack marks its RAM read-only, so the session uses the
generic ``cortex_m`` target (no memory map; pyOCD finds the core on whichever access port holds
it, AP1 on the N6) and the image goes through plain memory writes. ``connect_mode="attach"``:
connecting never resets the board. The core reset is pyOCD's emulated reset (what a core reset
falls back to on Armv8-M): SP and PC from the table VTOR points at, never a system reset, which
would erase AXISRAM1/2. pyOCD is imported only when a board is used.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from hilbench.board.debug import DebugLinkError
from hilbench.errors import HilbenchError

T = TypeVar("T")
UDEV_FIX = (
    "let your user reach the probe: install ST's udev rules for the ST-LINK (or add "
    'SUBSYSTEM=="usb", ATTR{idVendor}=="0483", MODE="0660", GROUP="plugdev" to '
    "/etc/udev/rules.d/49-stlink.rules), `sudo udevadm control --reload`, replug "
    "(docs/board.md)"
)


@dataclass(frozen=True)
class ProbeInfo:
    unique_id: str  # the ST-LINK's serial number: also its virtual COM port's serial number
    description: str
    vendor: str = ""
    product: str = ""


def quiet_pyocd() -> None:
    """pyOCD's warnings (logging's last-resort handler prints them to stderr) would break the
    one-line errors; hilbench says what went wrong itself. A user who configured logging for
    pyOCD (a level already set) keeps it."""
    logger = logging.getLogger("pyocd")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.ERROR)


def list_probes() -> list[ProbeInfo]:
    """The debug probes pyOCD finds (none is not an error here)."""
    from pyocd.core.helpers import ConnectHelper

    quiet_pyocd()
    try:
        probes = ConnectHelper.get_all_connected_probes(blocking=False, print_wait_message=False)
    except Exception as exc:  # pyOCD's USB back ends raise their own errors
        raise _probe_error(exc, "listing the debug probes") from None
    return [
        ProbeInfo(
            p.unique_id,
            p.description,
            getattr(p, "vendor_name", "") or "",
            getattr(p, "product_name", "") or "",
        )
        for p in probes
    ]


def _probe_error(exc: BaseException, doing: str) -> HilbenchError:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if "access denied" in text.lower() or "permission" in text.lower():
        return HilbenchError(
            f"no permission to use the debug probe while {doing}: {text}", UDEV_FIX
        )
    return DebugLinkError(
        f"the debug probe failed while {doing}: {text}",
        "check the USB cable; if the ST-LINK locked up, unplug and replug it",
    )


def _guarded(fn: Callable[..., T]) -> Callable[..., T]:
    """pyOCD's errors as DebugLinkError (worth a retry at a lower SWD frequency)."""

    @functools.wraps(fn)
    def call(self: PyocdTarget, *args: Any) -> T:
        from pyocd.core import exceptions

        try:
            return fn(self, *args)
        except (exceptions.ProbeError, exceptions.TransferError, exceptions.TimeoutError) as exc:
            raise DebugLinkError(
                f"the probe {self.name} failed during {fn.__name__}: "
                f"{(str(exc).splitlines() or [type(exc).__name__])[0]}"
            ) from None

    return call


class PyocdTarget:
    """A core reached through pyOCD. ``target`` is pyOCD's target object (a session's
    ``session.target``, or a stand-in with the same methods in tests); ``session`` is closed
    by :meth:`close`."""

    def __init__(self, target: Any, *, name: str, session: Any = None) -> None:
        self._t = target
        self.name = name
        self._session = session

    @classmethod
    def connect(cls, unique_id: str, frequency: int | None = None) -> PyocdTarget:
        """Open a pyOCD session on the probe ``unique_id`` (attach, no reset)."""
        from pyocd.core.helpers import ConnectHelper

        quiet_pyocd()
        options: dict[str, Any] = {"connect_mode": "attach", "resume_on_disconnect": True}
        if frequency:
            options["frequency"] = frequency
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # pyOCD prints "no probe" itself
                session = ConnectHelper.session_with_chosen_probe(
                    blocking=False,
                    unique_id=unique_id,
                    target_override="cortex_m",
                    auto_open=False,
                    options=options,
                )
            if session is None:
                raise HilbenchError(
                    f"no debug probe with id {unique_id!r}",
                    "see `hilbench probe list` for the probes attached",
                )
            session.open()
        except HilbenchError:
            raise
        except Exception as exc:
            raise _probe_error(exc, f"connecting to probe {unique_id}") from None
        return cls(session.target, name=unique_id, session=session)

    @_guarded
    def halt(self) -> None:
        self._t.halt()

    @_guarded
    def write_memory(self, address: int, data: bytes) -> None:
        self._t.write_memory_block8(address, data)

    @_guarded
    def read_memory(self, address: int, size: int) -> bytes:
        return bytes(self._t.read_memory_block8(address, size))

    @_guarded
    def write_word(self, address: int, value: int) -> None:
        self._t.write32(address, value)

    @_guarded
    def read_word(self, address: int) -> int:
        return int(self._t.read32(address))

    @_guarded
    def core_reset(self, vector_table: int) -> None:
        from pyocd.core.target import Target

        # pyOCD's emulated reset takes SP and PC from the table VTOR points at (the generic
        # target has no boot memory region): the loader wrote VTOR = vector_table first
        self._t.reset_and_halt(Target.ResetType.EMULATED)

    @_guarded
    def read_register(self, name: str) -> int:
        return int(self._t.read_core_register(name))

    @_guarded
    def resume(self) -> None:
        self._t.resume()

    def close(self) -> None:
        if self._session is not None:
            with contextlib.suppress(Exception):
                self._session.close()
            self._session = None
