"""A slow round trip raises the timeout for a time, not for a number of round trips, on links
whose answers come on their own time (issue 14: clean runs on a loaded host logged retries)."""

from __future__ import annotations

import pytest

from hilbench.client.device_client import Target
from hilbench.client.rto import PEAK_HALF_LIFE_S, PEAK_MARGIN, RtoEstimator
from hilbench.device import DeviceTwin, FrameEndpoint
from hilbench.link.faults import FaultSpec, FaultyPort
from hilbench.link.memory import MemoryPort


def after_a_stall(est: RtoEstimator, fast_samples: int, period_s: float) -> float:
    """The timeout after one 50 ms round trip then ``fast_samples`` of 1 ms, ``period_s``
    apart (a step rate): what the next request waits."""
    t = 100.0
    est.sample(0.050, now=t)
    for _ in range(fast_samples):
        t += period_s
        est.sample(0.001, now=t)
    return est.timeout()


def test_the_peak_halves_per_half_life_whatever_the_request_rate():
    # 2,000 round trips in 2 s: per-sample decay forgets the stall, time decay does not
    per_sample = after_a_stall(RtoEstimator(), 2000, 0.001)
    timed = after_a_stall(RtoEstimator(half_life_s=PEAK_HALF_LIFE_S), 2000, 0.001)
    assert per_sample < 0.050  # the next 50 ms stall would be a retry
    assert timed == pytest.approx(PEAK_MARGIN * 0.050 * 0.5 ** (2.0 / PEAK_HALF_LIFE_S))
    # and it does decay, by time: one half-life later it is half
    slow = after_a_stall(RtoEstimator(half_life_s=PEAK_HALF_LIFE_S), 1000, PEAK_HALF_LIFE_S / 1000)
    assert slow == pytest.approx(PEAK_MARGIN * 0.050 / 2)


def test_a_synchronous_link_keeps_the_per_sample_decay():
    """In memory the answer is there when write returns: only a lost frame is waited for, and
    a long-remembered peak would only slow every drop (10,000 of them in the soak test)."""
    port = MemoryPort(FrameEndpoint(DeviceTwin()).feed)
    assert Target(port)._timer.peak_half_life_s is None
    faulty = FaultyPort(port, FaultSpec(drop=0.1))
    assert Target(faulty)._timer.peak_half_life_s is None


def test_a_pty_or_socket_link_remembers_stalls_by_time(tmp_path):
    from hilbench.link.pty_pair import PtyPair
    from hilbench.link.serial_port import open_port

    pty = PtyPair()
    try:
        port = open_port(pty.path)
        try:
            assert Target(port)._timer.peak_half_life_s == PEAK_HALF_LIFE_S
        finally:
            port.close()
    finally:
        pty.close()
