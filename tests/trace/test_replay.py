"""Invariants 1 and 2 end to end: the host rebuilds the device's final weights bit-exactly."""

from hilbench.trace import Trace
from hilbench.trace.replay import replay


def test_replay_rebuilds_the_devices_weights(zo_session):
    outcome = zo_session(budget=3_000, scheduler="fixed:3", seed=5)
    result = replay(Trace.open(outcome.result.trace_path, run=outcome.result.run_id))
    assert result.steps == outcome.result.steps == 500
    assert result.recorded_crc == outcome.result.weights_crc
    assert result.matches, (
        f"replay 0x{result.weights_crc:08x} != device 0x{result.recorded_crc:08x}"
    )


def test_replay_notices_a_tampered_coefficient(zo_session, tmp_path):
    import shutil

    import h5py

    outcome = zo_session(budget=400, scheduler="fixed:2", seed=6)
    copy = tmp_path / "tampered.h5"
    shutil.copy(outcome.result.trace_path, copy)
    with h5py.File(copy, "r+") as f:
        samples = f[f"runs/{outcome.result.run_id}/samples"]
        row = samples[10]
        row["coeff"] += 5 * 65536  # five LSB more on one sample
        samples[10] = row
    assert not replay(Trace.open(copy, run=outcome.result.run_id)).matches
