"""``pytest --backends emulate,sil[,qemu]``: one test on every backend in one session, the runs
of each test compared across backends (real twin, real SIL program, real QEMU)."""

import shutil

import pytest

from hilbench.trace import Trace

SAMPLE = """
def test_device_answers(device):
    assert device.hello().device_id

def test_short_run(zo_session):
    out = zo_session(budget=400, scheduler="fixed:2", eval_every=200)
    assert out.trace.forward_passes == 400
"""

# A host-side scheduler that takes q=3 from step 7 on, on the SIL only: the runs of one test
# part there, and the plugin must say so (which backend, which step, what differs).
DRIFT = """
from hilbench.train.schedule import Scheduler, register

ON = {"drift": False}

class Drift(Scheduler):
    name = "drift"
    def next_q(self, step):
        return 3 if ON["drift"] and step >= 7 else 2

register("drift", lambda args: Drift())
"""
DRIFTING = """
from conftest import ON

def test_drifts(zo_session, hil_backend):
    ON["drift"] = hil_backend.kind == "sil"
    zo_session(budget=200, scheduler="drift", eval_every=100)
"""


def _traces(folder):
    return {p.name: Trace.open(p) for p in sorted(folder.glob("*.h5"))}


def test_each_test_runs_once_per_backend_and_the_runs_agree(pytester, tmp_path):
    pytester.makepyfile(SAMPLE)
    result = pytester.runpytest_subprocess(
        "-v", "--backends", "emulate,sil", "--trace-dir", str(tmp_path)
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*test_device_answers[[]emulate[]] PASSED*",
            "*test_short_run[[]emulate[]] PASSED*",
            "*test_device_answers[[]sil[]] PASSED*",
            "*test_short_run[[]sil[]] PASSED*",
            "*hilbench: the same test on every backend*",
            "*test_short_run[[]*[]]: same on emulate, sil: 100 steps, weights CRC 0x*",
        ]
    )
    traces = _traces(tmp_path)
    assert sorted(t.backend for t in traces.values()) == ["emulate", "sil"]
    a, b = traces.values()
    assert a.weights_crc == b.weights_crc and a.n_steps == b.n_steps == 100


@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="needs qemu-system-arm")
def test_the_same_test_on_the_twin_the_sil_and_qemu(pytester, tmp_path):
    pytester.makepyfile(SAMPLE)
    result = pytester.runpytest_subprocess(
        "-q", "--backends", "emulate,sil,qemu", "--trace-dir", str(tmp_path)
    )
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*test_short_run[[]*[]]: same on emulate, sil, qemu*"])
    assert sorted(t.backend for t in _traces(tmp_path).values()) == ["emulate", "qemu", "sil"]


def test_runs_that_part_fail_naming_the_backend_and_the_step(pytester, tmp_path):
    pytester.makeconftest(DRIFT)
    pytester.makepyfile(DRIFTING)
    result = pytester.runpytest_subprocess(
        "-q", "-p", "no:cacheprovider", "--backends", "emulate,sil", "--trace-dir", str(tmp_path)
    )
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(  # the failure, its hilbench section, and the summary
        [
            "*_ test_drifts[[]sil[]] _*",
            "hilbench --backends: sil parts from emulate at step 7: q 2 vs 3",
            "*- hilbench -*",
            "device    sil: *",
            "*backends*sil parts from emulate at step 7: q 2 vs 3*",
        ]
    )
    result.stdout.fnmatch_lines(["*test_drifts[[]*[]]: PARTS: sil parts from emulate at step 7*"])


def test_with_xdist_each_worker_has_its_own_devices_and_the_controller_compares(pytester, tmp_path):
    pytest.importorskip("xdist")
    pytester.makeconftest(DRIFT)
    pytester.makepyfile(test_a=SAMPLE, test_b=DRIFTING)
    result = pytester.runpytest_subprocess(
        "-q", "-n", "2", "--backends", "emulate,sil", "--trace-dir", str(tmp_path)
    )
    outcomes = result.parseoutcomes()  # test_drifts[sil] fails in its worker if the same
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 6  # worker ran emulate's
    assert result.ret == 1  # and the session fails either way: its runs part
    result.stdout.fnmatch_lines(
        ["*test_short_run[[]*[]]: same on emulate, sil: 100 steps*"], consecutive=False
    )
    result.stdout.fnmatch_lines(["*test_drifts[[]*[]]: PARTS: sil parts from emulate at step 7*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--backends", "emulate,simulator"],
            "*--backends names 'simulator', which is no backend*",
        ),
        (
            ["--backends", "emulate,sil", "--sil"],
            "*--backends names every backend*leave out --sil*",
        ),
        (["--backends", "emulate,emulate"], "*names 'emulate' twice*"),
        (["--backends", "sil", "--fw", "x"], "*--fw names one backend's firmware*"),
        (["--time-limit", "soon"], "*time limit 'soon' is not a duration*"),
        (["--until", "accuracy=0.9"], "*stopping rule 'accuracy=0.9'*accuracy>=0.9*"),
    ],
)
def test_bad_options_are_one_line(pytester, args, message):
    pytester.makepyfile(SAMPLE)
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


STOPPING = """
def test_time_limit(zo_session):
    out = zo_session(budget=10**8, time_limit_s=1.0)
    assert out.result.stop_reason.startswith("time limit 1 s reached after")
    assert out.trace.attrs["stop_reason"] == out.result.stop_reason
    assert out.trace.status == "complete" and out.replay.matches

def test_until(zo_session):
    out = zo_session(budget=10**6, until="accuracy>=0.8", eval_every=500, time_limit_s=0)
    assert out.result.final_accuracy >= 0.8
    assert out.trace.attrs["stop_reason"].startswith("until accuracy>=0.8: accuracy 0.")

def test_option_for_all(zo_session):
    out = zo_session(budget=10**8)
    assert out.trace.attrs["stop_reason"].startswith("time limit 2 s")
    assert out.trace.config["time_limit_s"] == 2.0
"""


def test_time_limits_and_rules_in_zo_session_and_for_all_tests(pytester):
    pytester.makepyfile(STOPPING)
    result = pytester.runpytest_subprocess("-q", "--time-limit", "2s", "--durations=3")
    result.assert_outcomes(passed=3)
