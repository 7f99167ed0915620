"""PacedPort holds a link to a UART's byte rate, in both directions, and no slower."""

import time

from hilbench.link.memory import MemoryPort
from hilbench.link.paced import PacedPort

BAUD = 115_200  # 11,520 bytes/s: 86.8 µs a byte


def echo_port() -> PacedPort:
    return PacedPort(MemoryPort(lambda data: data), BAUD)


def test_a_write_takes_the_line_time_of_its_bytes():
    port = echo_port()
    started = time.perf_counter()
    port.write(b"\x55" * 2304)  # 0.2 s on the line
    took = time.perf_counter() - started
    assert 0.2 <= took < 0.3, took


def test_bytes_read_one_at_a_time_cost_their_line_time_not_one_sleep_each():
    port = PacedPort(MemoryPort(lambda data: data), 921_600)  # 10.85 µs a byte
    port.write(b"\x55" * 4608)  # 50 ms on the line, and 4,608 bytes to read back
    started = time.perf_counter()
    got = b"".join(port.read(1) for _ in range(4608))
    took = time.perf_counter() - started
    assert got == b"\x55" * 4608
    # back to back: 50 ms (plus Python's per-call cost); one time.sleep per byte would add its
    # lateness, typically 50-100 µs, 4,608 times (0.3-0.5 s)
    assert 0.05 <= took < 0.15, took


def test_an_idle_line_is_not_credited_to_later_bytes():
    port = echo_port()
    port.write(b"\x55")
    port.read(1)
    time.sleep(0.05)  # the line idles: the next bytes cannot have arrived during it
    port.write(b"\x55" * 1152)
    started = time.perf_counter()
    port.read(1152)
    assert time.perf_counter() - started >= 0.1
