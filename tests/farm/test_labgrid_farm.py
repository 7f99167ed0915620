"""--board labgrid:... on a real labgrid coordinator and exporters (tests/farm/conftest.py)."""

from __future__ import annotations

import getpass
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.needs import need_module

need_module("labgrid", "pip install -e '.[farm]' (the dev extra includes it)")

from hilbench import session  # noqa: E402
from hilbench.backend.labgrid import LabgridBackend  # noqa: E402
from hilbench.config import RunConfig  # noqa: E402
from hilbench.errors import LinkError  # noqa: E402
from hilbench.farm.loaders import file_hash  # noqa: E402
from hilbench.launch.sil import sil_binary  # noqa: E402
from hilbench.trace import Trace  # noqa: E402
from tests.cli_helpers import ROOT, ctrl_c_reaches_the_child  # noqa: E402
from tests.farm.conftest import held, wait_all_free  # noqa: E402


def _run(board: str, trace: Path, budget: int = 400) -> tuple[session.RunResult, Trace]:
    config = RunConfig(backend="board", port=board, budget=budget, seed=2, trace=trace, live=False)
    result = session.run(config)
    return result, Trace.open(result.trace_path, result.run_id)


def test_runs_on_a_sil_place_and_a_twin_place_end_equal_and_name_their_place(coordinator, tmp_path):
    sil, sil_trace = _run("labgrid:sil-0", tmp_path / "sil.h5")
    twin, twin_trace = _run("labgrid:twin-0", tmp_path / "twin.h5")
    assert sil.weights_crc == twin.weights_crc  # the C firmware and the twin, bit-exact
    assert sil.final_accuracy == twin.final_accuracy
    a = sil_trace.attrs
    assert (a["place"], a["exporter_host"], a["probe_id"]) == ("sil-0", "exp0", "LABsil-0")
    assert a["firmware_hash"] == file_hash(sil_binary())  # the program "loaded" on acquire
    assert a["serial_url"].startswith("socket://127.0.0.1:")
    assert a["device_id"] == "sil-0"  # the loader started it with the place's device id
    b = twin_trace.attrs
    assert (b["place"], b["exporter_host"], b["probe_id"]) == ("twin-0", "exp0", "LABtwin-0")
    assert b["firmware_hash"] == ""  # kind none: nothing was loaded
    assert held(coordinator) == {}


def test_a_held_place_is_waited_for_with_a_countdown_then_its_holder_is_named(coordinator):
    holder = LabgridBackend("labgrid:sil-1")
    holder.open()
    try:
        host, user = holder.farm.name.split("/")
        assert held(coordinator) == {"sil-1": holder.farm.name}
        assert user.startswith(f"{getpass.getuser()}-hb{os.getpid()}")
        lines: list[str] = []
        waiter = LabgridBackend("labgrid:sil-1", wait=1.5, status=lines.append)
        started = time.monotonic()
        with pytest.raises(LinkError) as caught:
            waiter.open()
        waited = time.monotonic() - started
    finally:
        holder.close()
    message = str(caught.value)
    assert "\n" not in message
    assert f"waited 2 s for labgrid place sil-1: sil-1 held by {user} on {host} (since" in message
    assert "labgrid-client -p PLACE release" in message
    assert 1.4 < waited < 6.0
    left = [int(m.group(1)) for line in lines if (m := re.search(r"; (\d+) s left$", line))]
    assert left and left[0] >= 1 and left[-1] <= 1 and all(f"held by {user}" in x for x in lines)


def test_a_waiting_client_gets_the_place_as_soon_as_it_is_released(coordinator):
    holder = LabgridBackend("labgrid:twin-1")
    holder.open()
    timer = threading.Timer(1.0, holder.close)
    lines: list[str] = []
    waiter = LabgridBackend("labgrid:twin-1", wait=30, status=lines.append)
    started = time.monotonic()
    timer.start()
    try:
        waiter.open()
        waited = time.monotonic() - started
        assert waiter.place == "twin-1" and waiter.target is not None
        assert waiter.target.info.device_id == "hilbench-twin"
    finally:
        timer.join()
        waiter.close()
    assert 0.9 < waited < 10
    assert lines[0].startswith("waiting for labgrid place twin-1: twin-1 held by ")
    assert lines[-1] == "got twin-1 after waiting"


def test_tags_choose_free_places_and_a_third_client_is_told_who_holds_both(coordinator):
    first = LabgridBackend("labgrid:board=sil")
    second = LabgridBackend("labgrid:board=sil")
    first.open()
    try:
        second.open()
        try:
            assert {first.place, second.place} == {"sil-0", "sil-1"}
            assert first.target.info.device_id == first.place  # each its own SIL program
            assert second.target.info.device_id == second.place
            third = LabgridBackend("labgrid:board=sil", wait=0.5, status=lambda _: None)
            with pytest.raises(LinkError) as caught:
                third.open()
            message = str(caught.value)
            assert "a free place with board=sil" in message
            assert "sil-0 held by " in message and "sil-1 held by " in message
        finally:
            second.close()
    finally:
        first.close()


HOLD = """
import sys, time
from hilbench.backend.labgrid import LabgridBackend
backend = LabgridBackend(sys.argv[1])
backend.open()
print(backend.place, backend.location["serial_url"], flush=True)
time.sleep(300)
"""


def test_a_killed_client_s_place_is_released_by_its_guard(coordinator):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, "labgrid:sil-0"], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        place, url = proc.stdout.readline().split()
        assert place == "sil-0"
        assert held(coordinator)["sil-0"].endswith(f"-hb{proc.pid}")
        host, port = url.removeprefix("socket://").rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=2).close()  # its SIL program runs
    finally:
        proc.kill()
        proc.wait()
    assert wait_all_free(coordinator, timeout=10) < 10
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the SIL program died with its client
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
        except OSError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the SIL program of the killed client still answers")


def test_ctrl_c_in_hilbench_run_releases_the_place_and_the_trace_names_it(coordinator, tmp_path):
    trace = tmp_path / "interrupted.h5"
    argv = [sys.executable, "-m", "hilbench", "run", "--board", "labgrid:sil-1"]
    argv += ["--budget", "10000000", "--no-live", "--trace", str(trace)]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=ctrl_c_reaches_the_child,
    )
    try:
        deadline = time.monotonic() + 60
        while not (trace.exists() and "sil-1" in held(coordinator)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.2)
        time.sleep(1.0)  # training
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, err
    assert "sil-1" not in held(coordinator)
    run = Trace.open(trace)
    assert run.status == "interrupted"
    assert (run.attrs["place"], run.attrs["probe_id"]) == ("sil-1", "LABsil-1")


SAMPLE_SUITE = """
import json, os
import pytest

@pytest.mark.parametrize("seed", range(8))
def test_trains_on_a_farm_board(zo_session, seed, tmp_path_factory):
    out = zo_session(budget=200, seed=seed)
    place = out.trace.attrs["place"]
    record = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "place": place,
              "seed": seed, "crc": out.result.weights_crc}
    with open(os.environ["FARM_RECORD"], "a") as fh:
        fh.write(json.dumps(record) + "\\n")
    assert seed != 7, "a failing test: its worker's place is released all the same"
"""


def test_pytest_n_4_runs_the_suite_with_each_worker_on_its_own_board(coordinator, pytester):
    record = pytester.path / "record.jsonl"
    pytester.makeconftest("from threadpoolctl import threadpool_limits\nthreadpool_limits(1)\n")
    pytester.makepyfile(test_sample=textwrap.dedent(SAMPLE_SUITE))
    os.environ["FARM_RECORD"] = str(record)
    try:
        result = pytester.runpytest_subprocess(
            "-n", "4", "--board=labgrid:farm=lab", "--no-live", "-p", "no:cacheprovider"
        )
    finally:
        del os.environ["FARM_RECORD"]
    result.assert_outcomes(passed=7, failed=1)
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(rows) == 8
    place_of: dict[str, str] = {}
    for row in rows:  # a worker keeps its board for the session, no board has two workers
        assert place_of.setdefault(row["worker"], row["place"]) == row["place"]
    assert len(set(place_of.values())) == len(place_of) >= 2
    assert set(place_of.values()) <= {"sil-0", "sil-1", "twin-0", "twin-1"}
    by_seed: dict[int, set[int]] = {}
    for row in rows:
        by_seed.setdefault(row["seed"], set()).add(row["crc"])
    assert all(len(crcs) == 1 for crcs in by_seed.values())
    assert wait_all_free(coordinator, timeout=10) < 10


def test_no_coordinator_is_one_line_naming_the_address(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("LG_COORDINATOR", f"127.0.0.1:{port}")
    started = time.monotonic()
    with pytest.raises(LinkError) as caught:
        LabgridBackend("labgrid:anything").open()
    assert time.monotonic() - started < 12
    message = str(caught.value)
    assert f"no labgrid coordinator answers at 127.0.0.1:{port}" in message
    assert "LG_COORDINATOR=HOST:PORT" in message and "\n" not in message


def test_an_unknown_place_or_tag_lists_what_the_farm_has(coordinator):
    with pytest.raises(
        LinkError, match=r"has no place 'nope' \(it has sil-0, sil-1, twin-0, twin-1\)"
    ):
        LabgridBackend("labgrid:nope").open()
    with pytest.raises(LinkError, match=r"no labgrid place .* has tags board=n6 \(places: sil-0:"):
        LabgridBackend("labgrid:board=n6").open()
    assert held(coordinator) == {}


def test_the_strategy_loads_from_a_labgrid_environment_file(tmp_path):
    from labgrid import Environment

    from hilbench.client.device_client import Target
    from hilbench.farm.lab import free_port
    from hilbench.link.serial_port import open_port

    port = free_port()
    env_file = tmp_path / "env.yaml"
    env_file.write_text(
        textwrap.dedent(f"""
        targets:
          main:
            resources:
              NetworkSerialPort: {{host: 127.0.0.1, port: {port}, protocol: raw}}
              HilbenchDevice: {{kind: sil, probe: ENV1, device_id: from-env}}
            drivers:
              HilbenchLoaderDriver: {{}}
              HilbenchStrategy: {{}}
        imports:
          - hilbench.farm.labgrid_parts
        """)
    )
    target = Environment(str(env_file)).get_target("main")
    strategy = target.get_driver("HilbenchStrategy")
    strategy.transition("loaded")
    try:
        assert strategy.loader.loaded.firmware_hash == file_hash(sil_binary())
        device = Target(open_port(f"socket://127.0.0.1:{port}"), name="env")
        try:
            assert device.hello().device_id == "from-env"
        finally:
            device.close()
    finally:
        strategy.transition("off")
        target.cleanup()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_the_zo_study_runs_a_configuration_on_a_farm_board_with_the_twin_s_result(
    coordinator, tmp_path, monkeypatch
):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import zo_study as z
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    spec = z.Spec("mlp-scratch", "fixed:2", 50.0, 5, budget=300)
    monkeypatch.setattr(z, "OUT", tmp_path / "direct")
    direct = z.run_spec(spec)
    monkeypatch.setattr(z, "OUT", tmp_path / "farm")
    monkeypatch.setattr(z, "FARM", "labgrid:board=sil")
    farmed = z.run_spec(spec)
    assert farmed.weights_crc == direct.weights_crc
    assert farmed.curve == direct.curve
    assert farmed.extra["place"] in ("sil-0", "sil-1")
