"""QEMU's MPS3 AN547 (a Cortex-M55) started halted with its GDB stub and no image: the real
thing the loader's GDB-remote path drives here. UART0 listens on TCP without waiting for the
host (the loader opens it before the core resumes); the firmware's settings go on the
semihosting command line as with hilbench/launch/qemu.py."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket
import subprocess
import time

from hilbench.launch import an547

_PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # looked up before any fork
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # in the child, between fork and exec: QEMU ends with pytest
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    """Whether something listens on 127.0.0.1:port (from /proc: no connection is made)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    return True
    return False


class HaltedQemu:
    def __init__(self, firmware: str) -> None:
        self.gdb_port, self.uart_port = free_port(), free_port()
        semihosting = ",".join(
            [
                "enable=on",
                "target=native",
                "arg=hilbench-an547",
                "arg=--icount",
                f"arg=--firmware={an547.escape_arg(firmware)}",
            ]
        )
        self.argv = [
            "qemu-system-arm", "-M", "mps3-an547", "-nodefaults", "-nic", "none",
            "-display", "none", "-monitor", "none",
            "-serial", f"tcp:127.0.0.1:{self.uart_port},server=on,wait=off,nodelay=on",
            "-icount", "shift=0", "-semihosting-config", semihosting,
            "-S", "-gdb", f"tcp:127.0.0.1:{self.gdb_port}",
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_die_with_parent,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while not (listening(self.gdb_port) and listening(self.uart_port)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                self.stop()
                raise RuntimeError(f"QEMU did not start: {err[-500:]}")
            time.sleep(0.05)

    @property
    def uart_url(self) -> str:
        return f"socket://127.0.0.1:{self.uart_port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stderr:
            self.proc.stderr.close()
