"""A GDB remote stub as a :class:`~hilbench.board.debug.DebugTarget`: QEMU's ``-gdb``, or the
gdbserver of OpenOCD or pyOCD on a lab machine. The client speaks the few packets the loader
needs (``?``, ``m``/``M`` memory, ``p``/``P`` registers, ``D`` detach) with acknowledgements,
over TCP.

A core reset here is the emulated one pyOCD performs on Armv8-M: SP and PC from the vector
table, LR = 0xFFFFFFFF, xPSR = Thumb, r0-r12 = 0. ``resume`` detaches: QEMU's stub stops the
machine at any byte it receives while the machine runs, so the client sends nothing more once
the core runs.
"""

from __future__ import annotations

import contextlib
import re
import socket
import time

from hilbench.board.debug import DebugLinkError

# Cortex-M register numbers in the stub's "g" layout (GDB's arm-m-profile feature)
REGISTERS = {f"r{i}": i for i in range(13)} | {"sp": 13, "lr": 14, "pc": 15, "xpsr": 25}


def _checksum(data: bytes) -> bytes:
    return b"%02x" % (sum(data) & 0xFF)


class GdbRemoteTarget:
    """A core behind the GDB remote stub at ``host:port``."""

    def __init__(self, host: str, port: int, *, timeout: float = 5.0) -> None:
        self.name = f"GDB stub {host}:{port}"
        self.timeout = timeout
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise DebugLinkError(
                f"cannot reach the {self.name}: {exc.strerror or exc}",
                "start the stub (qemu-system-arm -S -gdb tcp::PORT, openocd, pyocd gdbserver) "
                "and check the address",
            ) from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = bytearray()
        self._detached = False
        self.packets_sent: list[bytes] = []  # every packet's first byte and address: for tests
        # GDB's opening: the features, then the target description (QEMU answers "p" and
        # "P" only to a client that read it)
        self.features = self._command(b"qSupported:multiprocess-;xmlRegisters=arm")
        size = re.search(rb"PacketSize=([0-9a-fA-F]+)", self.features)
        self.chunk = max(16, (int(size.group(1), 16) if size else 1024) - 32) // 2 // 4 * 4
        self.registers = dict(REGISTERS)
        if b"qXfer:features:read+" in self.features:
            self.registers.update(self._described_registers())

    # --- packets --------------------------------------------------------------------------
    def _recv(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self._sock.settimeout(left)
        try:
            chunk = self._sock.recv(65536)
        except TimeoutError:
            raise
        except OSError as exc:
            raise DebugLinkError(f"the {self.name} dropped the connection: {exc}") from None
        if not chunk:
            raise DebugLinkError(f"the {self.name} closed the connection")
        return chunk

    def _read_packet(self, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while True:
            start = self._buf.find(b"$")
            if start >= 0:
                end = self._buf.find(b"#", start)
                if end >= 0 and len(self._buf) >= end + 3:
                    body = bytes(self._buf[start + 1 : end])
                    check = bytes(self._buf[end + 1 : end + 3])
                    del self._buf[: end + 3]
                    if check.lower() != _checksum(body):
                        self._sock.sendall(b"-")
                        continue
                    self._sock.sendall(b"+")
                    return _run_length_decode(body)
            self._buf += self._recv(deadline)

    def _command(self, body: bytes, timeout: float | None = None) -> bytes:
        """Send one packet (resent on '-'), return the stub's answer packet."""
        self.packets_sent.append(body[:1] + (body[1:].split(b",")[0] if body[:1] in b"mM" else b""))
        frame = b"$" + body + b"#" + _checksum(body)
        timeout = self.timeout if timeout is None else timeout
        for _ in range(3):
            self._sock.sendall(frame)
            deadline = time.monotonic() + timeout
            try:
                while True:
                    while self._buf[:1] not in (b"+", b"-"):
                        if self._buf[:1] == b"$":  # a stop notice sent on its own: drop it
                            self._read_packet(max(deadline - time.monotonic(), 0.01))
                        elif self._buf:
                            del self._buf[:1]
                        else:
                            self._buf += self._recv(deadline)
                    ack = self._buf[:1]
                    del self._buf[:1]
                    break
            except TimeoutError:
                raise DebugLinkError(f"the {self.name} did not acknowledge a packet") from None
            if ack == b"+":
                try:
                    return self._read_packet(timeout)
                except TimeoutError:
                    raise DebugLinkError(f"the {self.name} did not answer a packet") from None
        raise DebugLinkError(f"the {self.name} rejected a packet three times")

    def _annex(self, name: str) -> str:
        """One target-description file (qXfer:features:read, in pieces)."""
        out = bytearray()
        while True:
            answer = self._command(
                b"qXfer:features:read:%s:%x,%x" % (name.encode(), len(out), 0xFFF)
            )
            if answer[:1] not in (b"m", b"l"):
                return out.decode(errors="replace")
            out += answer[1:]
            if answer[:1] == b"l":
                return out.decode(errors="replace")

    def _described_registers(self) -> dict[str, int]:
        """Register numbers by name from the stub's description (QEMU numbers xPSR 25, as
        GDB's arm-m-profile feature does; OpenOCD numbers its registers in order)."""
        numbers: dict[str, int] = {}
        following = 0

        def walk(name: str, depth: int) -> None:
            nonlocal following
            text = self._annex(name)
            for match in re.finditer(r"<reg\s[^>]*>|<xi:include\s[^>]*>", text):
                tag = match.group(0)
                href = re.search(r'href="([^"]+)"', tag)
                if tag.startswith("<xi:include") and href and depth < 3:
                    walk(href.group(1), depth + 1)
                    continue
                reg = re.search(r'name="([^"]+)"', tag)
                num = re.search(r'regnum="(\d+)"', tag)
                if reg:
                    following = int(num.group(1)) if num else following
                    numbers[reg.group(1).lower()] = following
                    following += 1

        walk("target.xml", 0)
        return {n: numbers[n] for n in REGISTERS if n in numbers}

    def _ok(self, body: bytes, what: str) -> None:
        answer = self._command(body)
        if answer != b"OK":
            raise DebugLinkError(
                f"the {self.name} refused {what}: {answer.decode(errors='replace')}"
            )

    # --- DebugTarget ------------------------------------------------------------------------
    def halt(self) -> None:
        """A stub halts the core when GDB attaches (QEMU, OpenOCD, pyOCD), and this client
        never sends "c": "?" confirms the stop. Only a core this client resumed is
        interrupted first."""
        if self._detached:
            raise DebugLinkError(f"the {self.name}: this connection already resumed the core")
        answer = self._command(b"?")
        if answer[:1] not in (b"S", b"T"):
            raise DebugLinkError(f"the {self.name} does not report a halted core ({answer!r})")

    def write_memory(self, address: int, data: bytes) -> None:
        step = self.chunk
        for off in range(0, len(data), step):
            part = data[off : off + step]
            self._ok(b"M%x,%x:" % (address + off, len(part)) + part.hex().encode(), "a write")

    def read_memory(self, address: int, size: int) -> bytes:
        out = bytearray()
        step = self.chunk
        for off in range(0, size, step):
            n = min(step, size - off)
            answer = self._command(b"m%x,%x" % (address + off, n))
            if answer[:1] == b"E" or len(answer) != 2 * n:
                raise DebugLinkError(
                    f"the {self.name} cannot read 0x{address + off:08x} ({answer[:8]!r})"
                )
            out += bytes.fromhex(answer.decode())
        return bytes(out)

    def write_word(self, address: int, value: int) -> None:
        self.write_memory(address, value.to_bytes(4, "little"))

    def read_word(self, address: int) -> int:
        return int.from_bytes(self.read_memory(address, 4), "little")

    def write_register(self, name: str, value: int) -> None:
        self._ok(
            b"P%x=%s"
            % (self.registers[name], (value & 0xFFFFFFFF).to_bytes(4, "little").hex().encode()),
            f"a write of {name}",
        )

    def read_register(self, name: str) -> int:
        answer = self._command(b"p%x" % self.registers[name])
        if len(answer) != 8:
            raise DebugLinkError(f"the {self.name} cannot read {name} ({answer[:8]!r})")
        return int.from_bytes(bytes.fromhex(answer.decode()), "little")

    def core_reset(self, vector_table: int) -> None:
        initial_sp = self.read_word(vector_table)
        reset_pc = self.read_word(vector_table + 4)
        for i in range(13):
            self.write_register(f"r{i}", 0)
        self.write_register("sp", initial_sp)
        self.write_register("lr", 0xFFFFFFFF)
        self.write_register("pc", reset_pc & ~1)
        self.write_register("xpsr", 0x01000000)

    def resume(self) -> None:
        self._ok(b"D", "the detach that resumes the core")
        self._detached = True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()


def _run_length_decode(body: bytes) -> bytes:
    """Undo the remote protocol's run-length encoding ("x*" + chr(n + 29): n more x)."""
    if b"*" not in body:
        return body
    out = bytearray()
    i = 0
    while i < len(body):
        if body[i : i + 1] == b"*" and out and i + 1 < len(body):
            out += out[-1:] * (body[i + 1] - 29)
            i += 2
        else:
            out.append(body[i])
            i += 1
    return bytes(out)
