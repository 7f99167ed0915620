"""labgrid brings its pyserial fork (pyserial-labgrid), which installs the same ``serial``
package as pyserial: hilbench must work with whichever files ended up installed, through
socket:// (a raw-TCP NetworkSerialPort) and rfc2217:// (ser2net, labgrid's default export)."""

from __future__ import annotations

import importlib.metadata as md
import socket
import threading
from collections.abc import Iterator

import pytest
import serial
import serial.rfc2217

from hilbench import session
from hilbench.backend.serial import SerialBackend
from hilbench.config import RunConfig
from hilbench.device import DeviceTwin, ThreadedServer
from hilbench.link.pty_pair import PtyPair


def _dists_owning_serial() -> dict[str, str]:
    owners = {}
    for name in ("pyserial", "pyserial-labgrid"):
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        if any(str(f) == "serial/__init__.py" for f in dist.files or ()):
            owners[name] = dist.version
    return owners


def test_the_installed_serial_package_is_pyserial_or_labgrid_s_fork():
    owners = _dists_owning_serial()
    assert owners, "no distribution owns the serial package"
    # the files on disk are the last installed distribution's: its version is serial's
    assert serial.__version__ in owners.values()
    if "labgrid" in {d.metadata["Name"] for d in md.distributions()}:
        assert "pyserial-labgrid" in owners  # labgrid requires its fork


class _Connection:
    """What PortManager writes its telnet answers to (pyserial's example's Redirector)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn

    def write(self, data: bytes) -> None:
        self.conn.sendall(data)


class _PtyPort(serial.Serial):
    """The pty side of the twin; a pty has no modem lines, which PortManager asks about."""

    cts = dsr = ri = cd = False

    def _update_dtr_state(self) -> None:
        pass

    def _update_rts_state(self) -> None:
        pass


@pytest.fixture
def rfc2217_twin() -> Iterator[str]:
    """A twin behind a pty, served as RFC 2217 on loopback (as ser2net serves a board's
    port on a labgrid exporter), with pyserial's own PortManager."""
    pty = PtyPair()
    twin = ThreadedServer(DeviceTwin(), pty.device_stream())
    port = _PtyPort(pty.path, timeout=0.05)
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    pumps: list[threading.Thread] = []

    def serve() -> None:
        conn, _ = server.accept()
        conn.settimeout(0.05)
        manager = serial.rfc2217.PortManager(port, _Connection(conn))

        def to_net() -> None:
            while not stop.is_set():
                data = port.read(port.in_waiting or 1)
                if data:
                    conn.sendall(b"".join(manager.escape(data)))

        pump = threading.Thread(target=to_net, daemon=True)
        pump.start()
        pumps.append(pump)
        while not stop.is_set():
            try:
                data = conn.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            port.write(b"".join(manager.filter(data)))
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"rfc2217://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    for running in (thread, *pumps):
        running.join(5)
    server.close()
    port.close()
    twin.close()
    pty.close()


def test_a_run_through_rfc2217_ends_like_the_emulator(rfc2217_twin, tmp_path):
    base = RunConfig(budget=200, seed=4, live=False)
    local = session.run(base.replace(trace=tmp_path / "local.h5"))
    config = base.replace(backend="board", port=rfc2217_twin, trace=tmp_path / "rfc.h5")
    remote = session.run(config, backend=SerialBackend(rfc2217_twin))
    assert remote.weights_crc == local.weights_crc
    assert remote.final_accuracy == local.final_accuracy
