"""Faults end to end through the command line and the pytest plugin, and version mismatches."""

import json
import re
import socket
import threading
from collections import Counter

from hilbench.protocol import messages as m
from hilbench.protocol.frames import FrameDecoder, encode_frame
from hilbench.trace import Trace
from tests.cli_helpers import ROOT, hilbench

FAULTS = "drop=0.02,corrupt=0.02,duplicate=0.02,delay=0.02,truncate=0.02,reset=0.005,seed=4"


def test_a_faulty_run_ends_like_a_clean_one_and_its_trace_tells_what_happened(tmp_path):
    args = ["--budget", "2400", "--seed", "9", "--no-live"]
    clean = hilbench("run", *args, "--trace", str(tmp_path / "clean.h5"))
    faulty = hilbench("run", *args, "--link-faults", FAULTS, "--trace", str(tmp_path / "faulty.h5"))
    assert clean.returncode == 0 and faulty.returncode == 0, faulty.stderr
    a = json.loads(hilbench("report", str(tmp_path / "clean.h5"), "--json").stdout)
    b = json.loads(hilbench("report", str(tmp_path / "faulty.h5"), "--json").stdout)
    assert a["weights_crc"] == b["weights_crc"] and a["final_accuracy"] == b["final_accuracy"]
    events = Counter(Trace.open(tmp_path / "faulty.h5").events["kind"])
    assert events["injected"] > 50 and events["retry"] > 10 and events["resync"] > 5
    # one reset event per injected reset the host noticed, and one recovery per reset
    injected_resets = sum(
        1 for e in Trace.open(tmp_path / "faulty.h5").events if e["detail"].startswith("reset:")
    )
    assert 1 <= events["reset"] <= injected_resets
    # one recovery per reset, or one per burst of resets when a reset lands while the host is
    # still recovering from the last (retries under load move where the injected resets
    # fall): in order, the resets and recoveries read (reset+ recovered)*, ending recovered
    order = "".join(
        {"reset": "R", "recovered": "V"}[str(k)]
        for k in Trace.open(tmp_path / "faulty.h5").events["kind"]
        if str(k) in ("reset", "recovered")
    )
    assert re.fullmatch(r"(R+V)+", order), order
    assert 1 <= events["recovered"] <= events["reset"]
    clean_events = Counter(Trace.open(tmp_path / "clean.h5").events["kind"])
    assert clean_events["injected"] == clean_events["reset"] == clean_events["recovered"] == 0


def test_a_bad_fault_spec_is_one_clear_line(tmp_path):
    proc = hilbench("run", "--link-faults", "drop=2", "--trace", str(tmp_path / "t.h5"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "drop=2.0 is not a probability" in proc.stderr


def test_the_sample_test_passes_with_faults_injected(pytester):
    pytester.makeconftest("from threadpoolctl import threadpool_limits\nthreadpool_limits(1)\n")
    pytester.copy_example(str(ROOT / "tests" / "train" / "test_training.py"))
    result = pytester.runpytest_subprocess("--link-faults", FAULTS, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def old_device(server: socket.socket) -> None:
    """A device that speaks protocol version 0: it refuses every v1 frame."""
    conn, _ = server.accept()
    decoder = FrameDecoder()
    with conn:
        while data := conn.recv(4096):
            for frame in decoder.feed(data):
                error = m.ErrorResponse(
                    m.ErrorCode.BAD_VERSION,
                    frame.type,
                    f"device speaks protocol version 0, frame is version {frame.version}",
                )
                conn.sendall(encode_frame(m.ERROR, frame.seq, error.pack(), version=0))


def test_a_device_of_another_protocol_version_is_named(tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=old_device, args=(server,), daemon=True).start()
    port = server.getsockname()[1]
    proc = hilbench(
        "run", "--board", f"socket://127.0.0.1:{port}", "--trace", str(tmp_path / "t.h5")
    )
    server.close()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert "BAD_VERSION" in line and "version 0" in line and "version 1" in line
    assert "flash firmware built from this hilbench version" in line
