"""The firmware on a Cortex-M55 under ``qemu-system-arm -M mps3-an547``: find or build the
ELF, start QEMU with UART0 on a local TCP port, watch it, and always stop it.

``make -C device_fw an547`` builds ``device_fw/build/an547/hilbench-an547.elf`` (make decides
whether anything changed; builds are serialised with the SIL's lock file). QEMU runs with
``-icount shift=0`` so the firmware's tick counter follows executed instructions (timing source
``instructions``), semihosting for the firmware's settings (its command line), its console
(QEMU's stderr) and its exit code, and the UART as a TCP server that waits for the host
(``server=on,wait=on,nodelay=on``).

QEMU is stopped by :meth:`QemuProcess.stop` (the backend's close), by a finalizer if the
owner forgets, and by the kernel when the process that started it dies (``PR_SET_PDEATHSIG``
set in the child before QEMU runs), so a killed pytest leaves no QEMU behind. When the firmware
dies, :meth:`QemuProcess.death_report` gives QEMU's exit code, the fault report and the last
bytes the UART sent; :class:`QemuPort` raises it as the link's error.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path

import serial

from hilbench.errors import HilbenchError, LinkError
from hilbench.launch import an547
from hilbench.launch.make import output_tail, run_make
from hilbench.launch.process import repo_dir
from hilbench.link.wrapper import PortWrapper
from hilbench.protocol.frames import FrameDecoder

ELF_RELATIVE = Path("device_fw/build/an547/hilbench-an547.elf")
QEMU = "qemu-system-arm"
MACHINE = "mps3-an547"
CROSS_CC = "arm-none-eabi-gcc"
APT_QEMU = "apt install qemu-system-arm"
APT_CROSS = "apt install gcc-arm-none-eabi libnewlib-arm-none-eabi"
BUILD_TIMEOUT_S = 600
LISTEN_TIMEOUT_S = 20.0  # QEMU's start until it listens (a loaded 2-core machine: seconds)
STOP_TIMEOUT_S = 3.0
CONSOLE_LINES = 40  # QEMU's stderr lines kept for reports
UART_TAIL_BYTES = 256  # the last bytes the UART sent, kept for reports
PORT_ENV = "HILBENCH_QEMU_PORT"  # a fixed TCP port for the UART (default: a free one)
BIND_RETRIES = 4  # a free port taken between our probe and QEMU's bind: pick another

_EM_ARM = 40
_EM_NAMES = {3: "x86", 62: "x86-64", 183: "AArch64", 243: "RISC-V", 8: "MIPS", 20: "PowerPC"}
_PR_SET_PDEATHSIG = 1


# --------------------------------------------------------------------------- the image


def firmware_elf(fw: str | os.PathLike | None = None) -> Path:
    """The an547 firmware: ``fw`` if given (checked to be a 32-bit ARM ELF), else built from
    the checkout's device_fw/ with make."""
    if fw is not None:
        path = Path(fw)
        check_elf(path)
        return path
    root = repo_dir()
    if root is None:
        raise HilbenchError(
            "the QEMU backend needs the device_fw sources, and this hilbench is installed "
            "without them",
            "run from a git checkout of hilbench, or pass --fw PATH to a built hilbench-an547.elf",
        )
    build(root)
    return root / ELF_RELATIVE


def check_elf(path: Path) -> None:
    """Refuse, in one line, anything but a 32-bit little-endian ARM executable ELF."""
    fix = (
        f"pass the an547 firmware ({ELF_RELATIVE}, from make -C device_fw an547), or leave "
        "--fw out to build it"
    )
    try:
        with open(path, "rb") as f:
            head = f.read(52)
    except OSError as exc:
        raise HilbenchError(f"--fw {path}: {exc.strerror or exc}", fix) from None
    if len(head) < 52 or head[:4] != b"\x7fELF":
        raise HilbenchError(f"--fw {path} is not an ELF file", fix)
    bits, order = head[4], head[5]
    e_type, e_machine = struct.unpack_from("<HH" if order == 1 else ">HH", head, 16)
    if e_machine != _EM_ARM or bits != 1 or order != 1:
        machine = _EM_NAMES.get(e_machine, f"machine {e_machine}")
        if e_machine == _EM_ARM:
            machine = "big-endian ARM" if order != 1 else "64-bit ARM"
        raise HilbenchError(
            f"--fw {path} is an ELF for {machine}, not for the Cortex-M55 (32-bit ARM)", fix
        )
    if e_type != 2:  # ET_EXEC
        raise HilbenchError(f"--fw {path} is an ARM ELF but not an executable (type {e_type})", fix)


def build(root: Path) -> None:
    """``make -C device_fw an547``, one build at a time; a clear error if it fails."""
    if shutil.which("make") is None:
        raise HilbenchError(
            "building the an547 firmware needs make, which is not installed",
            "apt install make, or pass --fw PATH to a built hilbench-an547.elf",
        )
    if shutil.which(CROSS_CC) is None:
        raise HilbenchError(
            f"building the an547 firmware needs the Arm cross compiler {CROSS_CC}, which is "
            "not installed",
            f"{APT_CROSS}, or pass --fw PATH to a built hilbench-an547.elf",
        )
    status, output = run_make(root, "an547", timeout_s=BUILD_TIMEOUT_S)
    if status != 0:
        raise HilbenchError(
            f"building the an547 firmware failed (make -C device_fw an547): {output_tail(output)}",
            "fix the compile error, or pass --fw PATH to a built hilbench-an547.elf",
        )


def check_qemu(qemu: str = QEMU) -> str:
    """The path of qemu-system-arm; a one-line error naming the apt command if it is missing
    or too old to model the AN547."""
    path = shutil.which(qemu)
    if path is None:
        raise HilbenchError(f"--qemu needs {qemu}, which is not installed", APT_QEMU)
    try:
        machines = subprocess.run(
            [path, "-machine", "help"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise HilbenchError(f"{qemu} does not run: {exc}", APT_QEMU) from None
    if MACHINE not in machines:
        raise HilbenchError(
            f"{qemu} does not model the {MACHINE} board (QEMU 6.0 or later does)",
            f"install a newer QEMU ({APT_QEMU} on Debian 12)",
        )
    return path


# --------------------------------------------------------------------------- the process


def firmware_args(
    *,
    icount: bool = True,
    boot_nonce: int | None = None,
    arena_bytes: int | None = None,
    max_payload: int | None = None,
    device_id: str | None = None,
    firmware: str | None = None,
    crash_after: int | None = None,
) -> list[str]:
    """The firmware's options (hilbench/launch/an547.py), as semihosting arguments. Without a
    fixed ``boot_nonce`` the nonces derive from a fresh random seed (one per QEMU start)."""
    opt = an547.OPTIONS
    args = []
    if icount:
        args.append(opt["ICOUNT"])
    if boot_nonce is not None:
        args.append(f"{opt['BOOT_NONCE']}={boot_nonce}")
    else:
        args.append(f"{opt['NONCE_SEED']}={secrets.randbits(32)}")
    for key, value in (
        ("ARENA_BYTES", arena_bytes),
        ("MAX_PAYLOAD", max_payload),
        ("DEVICE_ID", device_id),
        ("FIRMWARE", firmware),
        ("CRASH_AFTER", crash_after),
    ):
        if value is not None:
            args.append(f"{opt[key]}={an547.escape_arg(str(value))}")
    return args


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_prctl = None  # libc's prctl, looked up in the parent (no dlopen between fork and exec)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class QemuProcess:
    """``qemu-system-arm -M mps3-an547`` running ``elf`` with UART0 on 127.0.0.1:``port``.

    ``start()`` returns once QEMU listens (it starts the CPU when the host connects);
    ``console()`` is what it wrote on stderr (semihosting console: the firmware's BOOT lines
    and fault report; QEMU's own messages), ``boots()`` the BOOT lines seen so far."""

    def __init__(
        self,
        elf: Path,
        fw_args: Sequence[str] = (),
        *,
        port: int | None = None,
        icount: bool = True,
        qemu: str = QEMU,
        gdb: bool = False,
    ) -> None:
        self.elf = Path(elf)
        #: ``gdb``: QEMU's GDB stub listens on 127.0.0.1:``gdb_port`` (staged uploads,
        #: hilbench/board/stage.py); the machine runs until a debugger attaches
        self.gdb = gdb
        self.gdb_port: int | None = None
        self.fw_args = list(fw_args)
        self.fixed_port = port if port is not None else _env_port()
        self.port: int | None = None
        self.icount = icount
        self.qemu = qemu
        self._console: collections.deque[str] = collections.deque(maxlen=CONSOLE_LINES)
        self._fault: str | None = None
        self._boots = 0
        self._listening = threading.Event()
        self._changed = threading.Condition()
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    def argv(self, port: int) -> list[str]:
        semihosting = ",".join(
            ["enable=on", "target=native", "arg=hilbench-an547"]
            + [f"arg={a}" for a in self.fw_args]
        )
        argv = [self.qemu, "-M", MACHINE, "-nodefaults", "-nic", "none", "-display", "none"]
        argv += ["-monitor", "none"]
        argv += ["-serial", f"tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on"]
        if self.icount:
            argv += ["-icount", "shift=0"]
        if self.gdb_port is not None:
            argv += ["-gdb", f"tcp:127.0.0.1:{self.gdb_port}"]
        return [*argv, "-semihosting-config", semihosting, "-kernel", str(self.elf)]

    def start(self, timeout: float = LISTEN_TIMEOUT_S) -> int:
        """Start QEMU; return the TCP port its UART listens on."""
        qemu = check_qemu(self.qemu)
        check_elf(self.elf)
        tries = 1 if self.fixed_port is not None else BIND_RETRIES
        for attempt in range(tries):
            port = self.fixed_port if self.fixed_port is not None else _free_port()
            if self.gdb:
                self.gdb_port = _free_port()
            self._launch(qemu, port)
            if self._wait_listening(timeout):
                self.port = port
                return port
            taken = any("Address already in use" in line for line in self._console)
            self.stop()
            if taken and self.fixed_port is not None:
                raise LinkError(
                    f"QEMU cannot listen on 127.0.0.1:{port} for the UART: the port is taken",
                    f"free it, or pick another with {PORT_ENV}=PORT (unset: any free port)",
                )
            if not taken or attempt == tries - 1:
                break
        raise LinkError(
            f"QEMU did not start: {self.failure()}",
            f"run `{' '.join(self.argv(0))}` by hand to see why",
        )

    def _launch(self, qemu: str, port: int) -> None:
        self._console.clear()
        self._listening.clear()
        argv = self.argv(port)
        argv[0] = qemu
        global _prctl
        if _prctl is None:
            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,  # Ctrl-C in the terminal goes to us; we stop QEMU
                preexec_fn=_die_with_parent,  # prctl only: safe between fork and exec
            )
        except OSError as exc:
            raise LinkError(f"cannot start {qemu}: {exc.strerror or exc}", APT_QEMU) from None
        self._finalizer = weakref.finalize(self, _kill, self._proc)
        threading.Thread(target=self._drain, args=(self._proc.stderr,), daemon=True).start()

    def _wait_listening(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self._listening.wait(0.05):
            if self.returncode is not None or time.monotonic() > deadline:
                return False
        return True

    def _drain(self, stream) -> None:
        with contextlib.suppress(OSError, ValueError), stream:  # ends at QEMU's end
            self._drain_lines(stream)
        with self._changed:
            self._changed.notify_all()

    def _drain_lines(self, stream) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip()
            with self._changed:
                self._console.append(line)
                if "waiting for connection" in line:
                    self._listening.set()
                if an547.parse_boot(line) is not None:
                    self._boots += 1
                fault = an547.find_fault(line)
                if fault:
                    self._fault = fault
                self._changed.notify_all()

    # --- state -------------------------------------------------------------------------------
    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def console(self) -> list[str]:
        with self._changed:
            return list(self._console)

    def boots(self) -> int:
        """BOOT lines the firmware wrote so far (1 after the first boot, +1 per reset)."""
        with self._changed:
            return self._boots

    def wait_boots(self, n: int, timeout: float) -> bool:
        """Wait until the firmware booted ``n`` times (False on timeout or QEMU's end)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._boots < n:
                left = deadline - time.monotonic()
                if left <= 0 or self.returncode is not None:
                    return self._boots >= n
                self._changed.wait(min(left, 0.1))
        return True

    def failure(self) -> str:
        """QEMU's exit status and its last console lines."""
        code = self.returncode
        if code is None:
            status = "QEMU is still running"
        elif code < 0:
            status = f"QEMU was killed by signal {-code}"
        else:
            status = f"QEMU exited with code {code}{_EXIT_MEANING.get(code, '')}"
        time.sleep(0.05)  # let the drain thread collect the last lines
        lines = [line for line in self.console() if line and not _noise(line)]
        return f"{status}; its stderr: {' | '.join(lines[-8:]) or 'nothing else'}"

    def death_report(self, uart_tail: bytes = b"", wait: float = 2.0) -> str:
        """Why the firmware stopped answering: exit code, fault report, UART tail, stderr."""
        if self._proc is not None and self.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(wait)
        parts = [self.failure()]
        fault = self._fault or _fault_in_frames(uart_tail)
        if fault:
            parts.insert(1, f"fault report: {fault}")
        parts.append(f"UART tail: {uart_tail[-64:].hex(' ') or 'nothing'}")
        return "; ".join(parts)

    def stop(self) -> None:
        if self._proc is not None:
            _kill(self._proc)
        if self._finalizer is not None:
            self._finalizer.detach()


_EXIT_MEANING = {
    an547.EXIT_FAULT: " (the firmware faulted)",
    an547.EXIT_BAD_OPTION: " (the firmware refused an option)",
    1: " (QEMU's own error)",
}


def _noise(line: str) -> bool:
    """QEMU's lines that every start prints: left out of reports."""
    return "waiting for connection on" in line or "has no peer" in line


def _env_port() -> int | None:
    text = os.environ.get(PORT_ENV, "").strip()
    if not text:
        return None
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise HilbenchError(
            f"{PORT_ENV}={text!r} is not a TCP port", f"give 1..65535, or unset {PORT_ENV}"
        )
    return int(text)


def _fault_in_frames(data: bytes) -> str | None:
    """The fault report of an ERROR frame among the bytes the UART sent, if any."""
    from hilbench.protocol import messages as m

    text = []
    for frame in FrameDecoder().feed(bytes(data) + b"\x00"):
        if frame.type == m.ERROR:
            with contextlib.suppress(m.MessageError):
                text.append(m.decode_response(frame).message)
    return an547.find_fault(" ".join(text))


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(STOP_TIMEOUT_S)
    # its stderr is closed by the thread that reads it, at the end of file


# --------------------------------------------------------------------------- the link


class QemuPort(PortWrapper):
    """The UART's TCP connection, keeping the last bytes received; when the connection fails
    because QEMU ended, the error says why (exit code, fault report, UART tail)."""

    def __init__(self, port: serial.SerialBase, process: QemuProcess) -> None:
        super().__init__(port)
        self.process = process
        self.tail = bytearray()

    def _died(self, exc: Exception) -> serial.SerialException:
        report = self.process.death_report(bytes(self.tail))
        return serial.SerialException(f"the firmware under QEMU stopped ({exc}): {report}")

    def read(self, size: int = 1) -> bytes:
        try:
            data = self.port.read(size)
        except serial.SerialException as exc:
            raise self._died(exc) from None
        if not data and self.process.returncode is not None:
            # QEMU may have sent its last bytes (a fault's ERROR frame) between the empty
            # read and its exit: hand them on first; the read after them reports the end
            data = self._last_bytes()
            if not data:
                raise self._died(RuntimeError("QEMU is gone"))
        if data:
            self.tail += data
            del self.tail[:-UART_TAIL_BYTES]
        return data

    def _last_bytes(self) -> bytes:
        """What is left in the connection of a QEMU that has ended, up to its end of file
        (read byte by byte: pyserial drops a read's bytes when the end of file cuts it)."""
        rest = bytearray()
        with contextlib.suppress(serial.SerialException, OSError):
            while self.port.in_waiting:
                byte = self.port.read(1)
                if not byte:
                    break
                rest += byte
        return bytes(rest)

    @property
    def in_waiting(self) -> int:
        try:
            return self.port.in_waiting
        except (serial.SerialException, OSError) as exc:
            raise self._died(exc) from None

    def write(self, data: bytes) -> int:
        try:
            return self.port.write(data)
        except (serial.SerialException, OSError) as exc:
            raise self._died(exc) from None

    def close(self) -> None:
        # pyserial's socket close sleeps 0.3 s "for quick reconnects": not needed here
        sock = getattr(self.port, "_socket", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
            self.port._socket = None
            self.port.is_open = False
        else:
            self.port.close()
