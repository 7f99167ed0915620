"""The pytest plugin as a lab user meets it: options, backend choice, markers, failures."""

# Subprocess runs: an in-process run drops from sys.modules what it imported first (h5py, the
# compiled kernels), and those cannot be imported twice in one process.

import pytest

SAMPLE = """
def test_device_answers(device):
    info = device.hello()
    assert info.protocol_version >= 1 and info.device_id

def test_trace_of_a_short_run(zo_session):
    outcome = zo_session(budget=200, scheduler="fixed:2")
    assert outcome.trace.forward_passes == 200
    assert outcome.trace.path.exists()
"""


def test_options_are_listed_in_one_group(pytester):
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(
        [
            "hilbench: the device under test:",
            "*--emulate*",
            "*--board=PORT*",
            "*--qemu*",
            "*--trace-dir=DIR*",
            "*--no-live*",
        ]
    )


def test_emulate_is_the_default_and_traces_land_in_trace_dir(pytester, tmp_path):
    pytester.makepyfile(SAMPLE)
    result = pytester.runpytest_subprocess(
        "--trace-dir", str(tmp_path / "traces"), "--junitxml", str(tmp_path / "junit.xml")
    )
    result.assert_outcomes(passed=2)
    traces = list((tmp_path / "traces").glob("*.h5"))
    assert len(traces) == 1 and "test_trace_of_a_short_run" in traces[0].name
    junit = (tmp_path / "junit.xml").read_text()
    assert 'name="hilbench.forward_passes" value="200"' in junit


def test_qemu_with_a_bad_firmware_fails_with_a_clear_message_instead_of_passing(pytester):
    pytester.makepyfile(SAMPLE)
    (pytester.path / "fw.bin").write_bytes(b"not an image")
    result = pytester.runpytest_subprocess("--qemu", "--fw=fw.bin")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*--fw fw.bin is not an ELF file*device_fw*an547*"])


def test_two_backends_at_once_are_refused(pytester):
    pytester.makepyfile(SAMPLE)
    result = pytester.runpytest_subprocess("--emulate", "--board=socket://127.0.0.1:9")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*choose one backend*"])


@pytest.mark.parametrize("board", ["--board=", "--board= "])
def test_an_empty_board_is_refused_not_run_on_the_emulator(pytester, board):
    """A CI job with an unset $PORT must not go green without hardware."""
    pytester.makepyfile(SAMPLE)
    result = pytester.runpytest_subprocess(board)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*hilbench: the board backend needs a port*--board PORT*"])


def test_an_unreachable_board_fails_the_tests_with_the_cause(pytester):
    pytester.makepyfile(SAMPLE)
    result = pytester.runpytest_subprocess("--board=/dev/ttyNOSUCH7")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*cannot open serial port '/dev/ttyNOSUCH7'*"])


def test_hardware_timing_tests_skip_with_a_reason_off_board(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.hardware_timing
        def test_probe_latency(device):
            raise AssertionError("must not run on the emulator")
        """
    )
    result = pytester.runpytest_subprocess("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*--board=PORT on a physical board*"])
