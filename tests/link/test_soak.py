"""Invariant 3 under fire: 10,000 faults of each kind, and the weights end bit-identical.

Each run is the same short ZO run; the clean twin's final weights CRC is the reference. The bulk
uses the in-memory link (same device code, no serial stack) so that 10,000 faults of each kind
fit in a few minutes; a smaller run goes through a real pty with pyserial.
"""

from hilbench.link.faults import FRAME_FAULTS, FaultSpec
from tests.link.soak import soak

TARGET = 10_000


def test_ten_thousand_frame_faults_of_each_kind_change_nothing():
    spec = FaultSpec.parse(
        "drop=0.04,corrupt=0.04,duplicate=0.04,delay=0.04,truncate=0.04,seed=11,max_delay_s=0.002"
    )
    result = soak(spec, max_runs=2_000, until=TARGET)
    assert result.mismatches == []
    for kind in FRAME_FAULTS:
        assert result.faults[kind] >= TARGET, (kind, result.faults)


def test_ten_thousand_device_resets_change_nothing():
    result = soak(FaultSpec.parse("reset=0.15,seed=12"), max_runs=600, until=TARGET)
    assert result.mismatches == []
    assert result.faults["reset"] >= TARGET, result.faults
    assert result.recoveries >= TARGET // 5  # most resets hit a run; some hit a recovery


def test_every_fault_kind_over_a_real_pty():
    spec = FaultSpec.parse(
        "drop=0.03,corrupt=0.03,duplicate=0.03,delay=0.03,truncate=0.03,reset=0.01,seed=13"
    )
    result = soak(spec, max_runs=25, link="pty")
    assert result.mismatches == []
    for kind in (*FRAME_FAULTS, "reset"):
        assert result.faults[kind] >= 10, (kind, result.faults)
