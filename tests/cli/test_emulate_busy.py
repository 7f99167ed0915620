"""Issue 26 item 10: a busy ``hilbench emulate --listen`` answers a second host at once that
it serves another one (an ERROR the client turns into one line), instead of looking dead."""

from __future__ import annotations

import threading
import time

import pytest

from hilbench.client.device_client import DeviceClient
from hilbench.device import DeviceTwin, serve_tcp
from hilbench.errors import DeviceError
from hilbench.link.serial_port import open_port


@pytest.fixture
def server():
    stop = threading.Event()
    where: dict[str, int] = {}
    ready = threading.Event()
    lines: list[str] = []

    def listening(host: str, port: int) -> None:
        where["port"] = port
        ready.set()

    thread = threading.Thread(
        target=serve_tcp,
        args=("127.0.0.1", 0, DeviceTwin()),
        kwargs={"on_listening": listening, "stop": stop, "log": lines.append},
        daemon=True,
    )
    thread.start()
    assert ready.wait(10)
    yield f"socket://127.0.0.1:{where['port']}", lines
    stop.set()
    thread.join(5)


def test_a_second_host_is_told_the_twin_is_taken(server):
    url, lines = server
    first = DeviceClient(open_port(url), name="first")
    first.hello()
    second = DeviceClient(open_port(url), name=url, timeout=2.0, retries=2)
    started = time.monotonic()
    with pytest.raises(DeviceError) as e:
        second.hello()
    took = time.monotonic() - started
    assert took < 1.5  # answered, not timed out (2 s per try)
    text = str(e.value)
    assert f"{url} is taken: this hilbench emulate --listen serves 127.0.0.1:" in text
    assert "another port" in text and "bug" not in text
    assert any(line.startswith("refused 127.0.0.1:") for line in lines)
    first.hello()  # the first host is still served
    second.close()
    first.close()
    deadline = time.monotonic() + 5
    while not any("disconnected" in line for line in lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    third = DeviceClient(open_port(url), name="third")  # free again: the next host is served
    assert third.hello().device_id
    third.close()


def test_a_host_that_connects_right_after_the_last_one_closed_is_served(server):
    """The host before has closed its socket but the server has not read its end yet: the
    newcomer is served, not told the twin is taken by a host that is gone."""
    url, lines = server
    for n in range(5):
        first = DeviceClient(open_port(url), name="first")
        first.hello()
        first.close()
        second = DeviceClient(open_port(url), name=f"second {n}", timeout=2.0, retries=1)
        assert second.hello().device_id
        second.close()
    assert not any(line.startswith("refused") for line in lines)
