"""A failing test's hilbench section ends with the device's last own words (pytest in a
subprocess on the real SIL: the boot banner the firmware sent at HELLO)."""

from __future__ import annotations

BANNER = "[boot] boot: hilbench-sil, firmware hilbench-sil protocol 1, reset host"

TESTS = """
def test_trains_then_fails(zo_session):
    out = zo_session(budget=200, scheduler="fixed:2")
    assert out.result.final_accuracy > 1.5

def test_only_talks_then_fails(device):
    assert device.weights_crc()[1] == 99
"""


def _said(text: str) -> list[str]:
    return [line[10:] for line in text.splitlines() if line.startswith("said      ")]


def test_a_failing_test_shows_what_the_device_said(pytester):
    pytester.makepyfile(test_sample=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sil")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    said = _said(out)
    # the training test: its trace's device event, at step 0 (said before the run listened)
    assert f"step 0     {BANNER}" in said, out
    # the device-only test: no run, so the section is the client's own record
    assert BANNER in said, out
    assert out.count("- hilbench -") == 2
