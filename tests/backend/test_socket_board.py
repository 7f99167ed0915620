"""The serial path for real: the twin in another process, reached through pyserial socket://."""

import json

from tests.cli_helpers import ROOT, emulator_on_tcp, hilbench


def test_the_sample_test_passes_against_a_twin_over_tcp(pytester):
    pytester.makeconftest("from threadpoolctl import threadpool_limits\nthreadpool_limits(1)\n")
    pytester.copy_example(str(ROOT / "tests" / "train" / "test_training.py"))
    with emulator_on_tcp() as url:
        result = pytester.runpytest_subprocess(
            f"--board={url}", "--no-live", "-p", "no:cacheprovider"
        )
    result.assert_outcomes(passed=1)


def test_board_over_tcp_and_emulate_end_with_identical_weights(tmp_path):
    args = ["--budget", "800", "--seed", "3", "--scheduler", "fixed:2", "--no-live"]
    local = hilbench("run", *args, "--trace", str(tmp_path / "local.h5"))
    assert local.returncode == 0, local.stderr
    with emulator_on_tcp() as url:
        remote = hilbench("run", "--board", url, *args, "--trace", str(tmp_path / "remote.h5"))
    assert remote.returncode == 0, remote.stderr
    a = json.loads(hilbench("report", str(tmp_path / "local.h5"), "--json").stdout)
    b = json.loads(hilbench("report", str(tmp_path / "remote.h5"), "--json").stdout)
    assert (a["backend"], b["backend"]) == ("emulate", "board")
    assert a["steps"] == b["steps"] == 200
    assert a["weights_crc"] == b["weights_crc"]
    assert a["final_accuracy"] == b["final_accuracy"]
