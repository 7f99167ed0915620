"""Open a pyserial port from any URL (/dev/ttyACM0, COM3, socket://host:port, a pty path)."""

from __future__ import annotations

import contextlib
import socket

import serial

from hilbench.errors import LinkError

DEFAULT_BAUD = 921_600  # ST-LINK-V3 virtual COM port, as ST's validation firmware uses


def open_port(
    url: str, *, baudrate: int = DEFAULT_BAUD, timeout: float = 0.05
) -> serial.SerialBase:
    """An open pyserial port; a clear LinkError when it cannot be opened."""
    try:
        # pyserial's rfc2217:// (ser2net, a labgrid exporter's port) refuses a write timeout
        writes = {} if url.startswith("rfc2217://") else {"write_timeout": 5.0}
        port = serial.serial_for_url(url, baudrate=baudrate, timeout=timeout, **writes)
    except (serial.SerialException, ValueError, OSError) as exc:
        raise LinkError(f"cannot open serial port '{url}': {_reason(exc)}", _fix(url)) from None
    sock = getattr(port, "_socket", None)
    if sock is not None:  # pyserial's socket:// leaves Nagle on: 40 ms per round trip
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return port


def _reason(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    text = text.splitlines()[0]
    # pyserial says "could not open port URL: [Errno N] why": the caller names the port
    head, sep, rest = text.partition(": ")
    if sep and head.lower().startswith("could not open port"):
        return rest
    return text


def _fix(url: str) -> str:
    if url.startswith("socket://"):
        return "start the device (e.g. `hilbench emulate --listen HOST:PORT`) and check the address"
    return (
        "check the cable and the port name (`python -m serial.tools.list_ports`), "
        "or run on the emulator with --emulate"
    )


def close_socket_now(port: object) -> None:
    """Close a socket:// port without pyserial's 0.3 s pause after it (meant for a quick
    reconnect to the same server; a farm board is released right after, and the next client
    connects to a device that already serves one connection at a time)."""
    from serial.urlhandler.protocol_socket import Serial as SocketSerial

    if isinstance(port, SocketSerial) and port.is_open and port._socket is not None:
        with contextlib.suppress(OSError):
            port._socket.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            port._socket.close()
        port._socket = None
        port.is_open = False
