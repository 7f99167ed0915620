"""--board map:FILE: boards of one host locked by probe id, no coordinator (no labgrid needed)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hilbench import session
from hilbench.backend.map import MapBackend
from hilbench.config import RunConfig
from hilbench.device import DeviceTwin, serve_tcp
from hilbench.errors import ConfigError, LinkError
from hilbench.farm.local import read_map
from hilbench.trace import Trace
from tests.cli_helpers import ROOT


@pytest.fixture
def twins() -> Iterator[list[str]]:
    """Two twins on loopback TCP ports (threads of this process)."""
    stop = threading.Event()
    urls: list[str] = []
    ready = threading.Semaphore(0)
    threads = []
    for _ in range(2):

        def announce(host: str, port: int) -> None:
            urls.append(f"socket://{host}:{port}")
            ready.release()

        thread = threading.Thread(
            target=serve_tcp,
            args=("127.0.0.1", 0, DeviceTwin()),
            kwargs={"on_listening": announce, "stop": stop},
            daemon=True,
        )
        thread.start()
        threads.append(thread)
    for _ in threads:
        assert ready.acquire(timeout=10)
    yield urls
    stop.set()
    for thread in threads:
        thread.join(5)


@pytest.fixture
def board_map(tmp_path: Path, twins: list[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HILBENCH_LOCK_DIR", str(tmp_path / "locks"))
    path = tmp_path / "boards.toml"
    path.write_text(
        f'[boards.n6-a]\nport = "{twins[0]}"\nprobe = "003A00283132510D33353533"\n'
        'tags = { board = "n6", desk = "left" }\n\n'
        f'[boards.n6-b]\nport = "{twins[1]}"\nprobe = "0040002B3132510D33353533"\n'
        'tags = { board = "n6", desk = "right" }\n'
    )
    return path


def test_two_clients_get_the_two_boards_and_a_third_is_told_who_holds_them(board_map):
    first, second = MapBackend(f"map:{board_map}"), MapBackend(f"map:{board_map}:board=n6")
    first.open()
    try:
        second.open()
        try:
            assert {first.location["place"], second.location["place"]} == {"n6-a", "n6-b"}
            assert first.target.info.device_id == "hilbench-twin"
            lines: list[str] = []
            third = MapBackend(f"map:{board_map}", wait=0.6, status=lines.append)
            with pytest.raises(LinkError) as caught:
                third.open()
        finally:
            second.close()
    finally:
        first.close()
    message = str(caught.value)
    assert f"waited 1 s for any free board of {board_map}: n6-a held by pid " in message
    assert "n6-b held by pid " in message and "\n" not in message
    assert lines and lines[0].endswith(" s left")
    again = MapBackend(f"map:{board_map}:n6-b")  # released: free again
    again.open()
    assert again.location["probe_id"] == "0040002B3132510D33353533"
    again.close()


def test_a_run_on_a_map_board_names_it_in_the_trace(board_map, tmp_path):
    config = RunConfig(
        backend="board", port=f"map:{board_map}:desk=right", budget=200, trace=tmp_path / "t.h5"
    )
    result = session.run(config.replace(live=False))
    attrs = Trace.open(result.trace_path, result.run_id).attrs
    assert (attrs["place"], attrs["probe_id"]) == ("n6-b", "0040002B3132510D33353533")


HOLD = """
import sys, time
from hilbench.backend.map import MapBackend
backend = MapBackend(sys.argv[1])
backend.open()
print(backend.location["place"], flush=True)
time.sleep(300)
"""


def test_a_killed_holder_frees_its_board_at_once(board_map):
    spec = f"map:{board_map}:n6-a"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, spec], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert proc.stdout.readline().strip() == "n6-a"
        with pytest.raises(LinkError, match=rf"n6-a held by pid {proc.pid} \("):
            MapBackend(spec, wait=0.3, status=lambda _: None).open()
    finally:
        proc.kill()
        proc.wait()
    # at once: the kernel drops a dead holder's lock, so the first try (no waiting) takes it;
    # a lock left behind would fail here as the held one did above (no timing: the load and
    # connect after the lock are as slow as the host is busy)
    backend = MapBackend(spec, wait=0, status=lambda _: None)
    backend.open()
    assert backend.timings["acquire"] >= 0 and backend.lock is not None
    backend.close()


def test_board_map_mistakes_are_one_line_each(tmp_path, board_map):
    bad = tmp_path / "bad.toml"
    cases = {
        "": "has no [boards.NAME] tables",
        "[boards.a]\nprobe = '1'\n": "names no port",
        "[boards.a]\nport = 'x'\nspeed = 3\n": "has no setting 'speed'",
        "[boards.a]\nport = 'x'\nkind = 'flash'\n": "kind 'flash' is not a loader",
        "[boards.a]\nport = 'x'\nprobe = '1'\n[boards.b]\nport = 'y'\nprobe = '1'\n": "has probe 1",
        "[boards": "is not valid TOML",
    }
    for text, needle in cases.items():
        bad.write_text(text)
        with pytest.raises(ConfigError, match=needle.replace("[", r"\[")):
            read_map(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        read_map(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match=r"no board of .* is a free place with board=n7"):
        MapBackend(f"map:{board_map}:board=n7").open()
