"""The GDB-remote client against a STAND-IN stub that describes its registers as OpenOCD does
(in order, no regnum: xPSR is register 16, not QEMU's 25), over a real TCP socket: the client
takes the numbers from the description, so the emulated core reset writes xPSR where this stub
keeps it. (QEMU's stub is exercised for real in test_loader_qemu.py.)"""

from __future__ import annotations

import socket
import threading

from hilbench.board.gdbremote import GdbRemoteTarget

NAMES = [f"r{i}" for i in range(13)] + ["sp", "lr", "pc", "xPSR"]
TARGET_XML = (
    '<?xml version="1.0"?><target><architecture>arm</architecture>'
    '<feature name="org.gnu.gdb.arm.m-profile">'
    + "".join(f'<reg name="{n}" bitsize="32" type="int"/>' for n in NAMES)
    + "</feature></target>"
)


def checksum(body: bytes) -> bytes:
    return b"%02x" % (sum(body) & 0xFF)


class OpenocdLikeStub:
    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.regs = [0] * len(NAMES)
        self.memory = bytearray(64)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def answer(self, body: bytes) -> bytes:
        if body.startswith(b"qSupported"):
            return b"PacketSize=4000;qXfer:features:read+"
        if body.startswith(b"qXfer:features:read:target.xml:"):
            offset, length = (int(x, 16) for x in body.rsplit(b":", 1)[1].split(b","))
            part = TARGET_XML.encode()[offset : offset + length]
            return (b"l" if offset + length >= len(TARGET_XML) else b"m") + part
        if body == b"?":
            return b"S05"
        if body.startswith(b"p"):
            return self.regs[int(body[1:], 16)].to_bytes(4, "little").hex().encode()
        if body.startswith(b"P"):
            num, value = body[1:].split(b"=")
            self.regs[int(num, 16)] = int.from_bytes(bytes.fromhex(value.decode()), "little")
            return b"OK"
        if body.startswith(b"m"):
            addr, n = (int(x, 16) for x in body[1:].split(b","))
            return bytes(self.memory[addr : addr + n]).hex().encode()
        return b""

    def serve(self) -> None:
        conn, _ = self.server.accept()
        buf = b""
        with conn:
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                buf += data
                while b"#" in buf and len(buf) >= buf.index(b"#") + 3:
                    start = buf.find(b"$")
                    if start < 0:
                        buf = b""
                        break
                    end = buf.index(b"#", start)
                    body, buf = buf[start + 1 : end], buf[end + 3 :]
                    reply = self.answer(body)
                    conn.sendall(b"+$" + reply + b"#" + checksum(reply))


def test_register_numbers_come_from_the_stubs_description():
    stub = OpenocdLikeStub()
    stub.memory[0:8] = (0x20001000).to_bytes(4, "little") + (0x00000101).to_bytes(4, "little")
    target = GdbRemoteTarget("127.0.0.1", stub.port)
    try:
        assert target.registers["xpsr"] == 16 and target.registers["pc"] == 15
        target.core_reset(0)
        assert stub.regs[16] == 0x01000000  # xPSR: Thumb, where this stub keeps it
        assert (
            stub.regs[13] == 0x20001000 and stub.regs[15] == 0x100 and stub.regs[14] == 0xFFFFFFFF
        )
        assert target.read_register("xpsr") == 0x01000000
    finally:
        target.close()
        stub.server.close()
