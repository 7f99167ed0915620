"""Reset recovery against hostile devices: every give-up path, and the state after a recovery.

The devices are the twin (the real device code behind the real frame layer and client, over
the in-process link), made hostile in one way each: one that reboots in the middle of an APPLY,
one that applies updates differently after each reboot, one that resets on every command, one
that drops an update when it replays, one that counts an update twice.
"""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.client.recovery import (
    CRC_EVERY,
    MAX_RECOVERIES_IN_A_ROW,
    RecoveringTarget,
    UpdateLog,
    WeightsDiverged,
)
from hilbench.device import DeviceTwin, ModelState
from hilbench.errors import DeviceError
from hilbench.protocol import data_blob
from hilbench.protocol import messages as m
from hilbench.session import direct_target
from tests.link.soak import tiny_workload

WORKLOAD = tiny_workload()
BLOB, X, Y = WORKLOAD
COEFFS = np.array([40_000, -25_000], np.int32)
APPLIES = (m.MessageType.APPLY, m.MessageType.APPLY_PROBED, m.MessageType.APPLY_PROBE)


def seeds_of(step: int) -> np.ndarray:
    return np.array([1000 + 2 * step, 1001 + 2 * step], np.uint32)


class HostileTwin(DeviceTwin):
    """The twin, with hooks: ``resets_before`` reboots it before handling the next N requests
    other than HELLO (a device that resets on every command while N > 0), ``reset_in_apply``
    reboots it at the next APPLY, before applying; after the first boot ``drift`` multiplies
    every coefficient it applies by the boot number, ``drop_in_batch`` skips an APPLY_BATCH's
    last step and ``count_twice`` applies each APPLY two times."""

    def __init__(self, **kw: object) -> None:
        self.resets_before = 0
        self.reset_in_apply = False
        self.drift = False
        self.drop_in_batch = False
        self.count_twice = False
        super().__init__(boot_nonce=7, **kw)

    def handle(self, frame):
        if self.resets_before > 0 and frame.type != m.MessageType.HELLO:
            self.resets_before -= 1
            self.reset()
        if self.reset_in_apply and frame.type in APPLIES:
            self.reset_in_apply = False
            self.reset()  # the rebooted device answers NO_SESSION: the APPLY never ran
        return super().handle(frame)

    def _update(self, model: ModelState, seeds: np.ndarray, coeffs: np.ndarray) -> None:
        if self.drift and self.boots > 1:
            coeffs = np.asarray(coeffs, np.int32) * np.int32(self.boots)
        for _ in range(2 if self.count_twice else 1):
            model.apply(seeds, coeffs)

    def _apply(self, req):
        model = self._need_model()
        self._update(model, req.seeds, req.coeffs)
        return m.ApplyResponse(updates_applied=model.updates_applied)

    def _apply_probed(self, req):
        model = self._need_model()
        self._update(model, self._check_probed(req.NAME, len(req.coeffs)), req.coeffs)
        return m.ApplyProbedResponse(updates_applied=model.updates_applied)

    def _apply_probe(self, req):
        if self.count_twice and self._probed is not None and self.model is not None:
            self.model.apply(self._probed, req.coeffs)
        return super()._apply_probe(req)

    def _apply_batch(self, req):
        model = self._need_model()
        steps = req.steps[:-1] if self.drop_in_batch and self.boots > 1 else req.steps
        for step in steps:
            self._update(model, step.seeds, step.coeffs)
        return m.ApplyBatchResponse(updates_applied=model.updates_applied)


def device(twin: DeviceTwin, **kw: object) -> tuple[RecoveringTarget, list[tuple[str, str]]]:
    events: list[tuple[str, str]] = []
    inner = direct_target(twin)
    inner.events.incident.subscribe(events.append)  # Incident(kind, detail): a 2-tuple
    return RecoveringTarget(inner, **kw), events


def start(dev: RecoveringTarget) -> None:
    dev.load_model(BLOB)
    dev.load_data(0, X, Y, 10)


def train(dev: RecoveringTarget, steps: range) -> list[np.ndarray]:
    """PROBE and APPLY per step; returns the losses each PROBE reported."""
    losses = []
    for step in steps:
        p = dev.probe(slot=0, batch_size=8, batch_seed=step, eps=2, seeds=seeds_of(step))
        losses.append(np.concatenate([p.loss_plus, p.loss_minus]))
        dev.apply(seeds_of(step), COEFFS)
    return losses


def reference(steps: int) -> tuple[int, list[np.ndarray]]:
    """Weights CRC and losses of the same run on a device that never resets."""
    dev, _ = device(DeviceTwin(boot_nonce=1))
    start(dev)
    losses = train(dev, range(steps))
    return dev.weights_crc()[0], losses


def test_a_reboot_inside_an_apply_is_recovered_and_the_update_applied_once():
    want_crc, want_losses = reference(12)
    twin = HostileTwin()
    dev, events = device(twin, crc_every=5)
    start(dev)
    losses = train(dev, range(7))
    twin.reset_in_apply = True
    losses += train(dev, range(7, 12))
    crc, applied = dev.weights_crc()
    assert (crc, applied) == (want_crc, 12)
    for got, want in zip(losses, want_losses, strict=True):
        np.testing.assert_array_equal(got, want)
    assert dev.recoveries == 1 and twin.boots == 2
    assert [a for a, _ in dev.log.checkpoints] == [5, 7, 10, 12]
    ((_, detail),) = [e for e in events if e[0] == "recovered"]
    assert detail.startswith("reloaded model and 1 data slot(s), replayed 7 updates in ")
    assert detail.endswith(f"weights CRC {dev.log.checkpoints[1][1]:#010x}")


def test_a_reset_between_commands_restores_the_data_slot_the_probe_reads():
    want_crc, want_losses = reference(6)
    twin = HostileTwin()
    dev, _ = device(twin, crc_every=0)
    start(dev)
    train(dev, range(3))
    twin.reset()  # watchdog: model, data and session are gone
    losses = train(dev, range(3, 6))
    for got, want in zip(losses, want_losses[3:], strict=True):
        np.testing.assert_array_equal(got, want)
    assert dev.weights_crc() == (want_crc, 6) and dev.recoveries == 1
    assert dev.log.checkpoints[0][0] == 3  # the recovery's own checkpoint, none by crc_every


def test_a_device_that_replays_differently_is_refused_with_both_crcs():
    """Deleting the CRC check after a replay would let this run go on with other weights."""
    twin = HostileTwin()
    twin.drift = True
    dev, _ = device(twin, crc_every=4)
    start(dev)
    train(dev, range(6))
    (done, before) = dev.log.last_checkpoint()
    assert done == 4
    twin.reset()
    with pytest.raises(DeviceError) as e:
        train(dev, range(6, 7))
    after = ModelState.from_blob(BLOB)
    for step in range(4):
        after.apply(seeds_of(step), COEFFS * 2)  # what the drifting device computed
    assert str(e.value).startswith(
        f"after a reset, replaying 4 updates gave weights CRC {after.weights_crc():#010x}, "
        f"the device reported {before:#010x} before the reset"
    )
    assert "does not apply updates deterministically" in str(e.value)
    assert dev.recoveries == 0


def test_a_device_that_loses_a_replayed_update_is_refused():
    twin = HostileTwin()
    twin.drop_in_batch = True
    dev, _ = device(twin, crc_every=0)
    start(dev)
    train(dev, range(5))
    twin.reset()
    with pytest.raises(DeviceError) as e:
        dev.apply(seeds_of(5), COEFFS)
    assert str(e.value).startswith("after a reset the device holds 4 updates, the log has 5")
    assert dev.recoveries == 0 and len(dev.log.steps) == 5


def test_a_wrong_count_after_a_replayed_checkpoint_is_refused():
    twin = HostileTwin()
    twin.drop_in_batch = True
    dev, _ = device(twin, crc_every=3)
    start(dev)
    train(dev, range(5))
    twin.reset()
    with pytest.raises(DeviceError, match="replaying 3 updates gave weights CRC 0x"):
        dev.weights_crc()


def test_a_device_that_counts_an_update_twice_is_stopped_at_once():
    twin = HostileTwin()
    dev, _ = device(twin)
    start(dev)
    train(dev, range(2))
    twin.count_twice = True
    with pytest.raises(DeviceError) as e:
        dev.apply(seeds_of(2), COEFFS)
    assert str(e.value).startswith(
        f"{dev.name} reports 4 updates applied after APPLY, the host acknowledged 3"
    )


@pytest.mark.parametrize("limit", [1, 3])
def test_resets_in_a_row_are_survived_up_to_the_limit(limit):
    want_crc, _ = reference(3)
    twin = HostileTwin()
    dev, events = device(twin, max_in_a_row=limit)
    start(dev)
    train(dev, range(2))
    twin.resets_before = limit  # the next `limit` commands each meet a freshly reset device
    train(dev, range(2, 3))
    assert dev.weights_crc() == (want_crc, 3)
    assert dev.recoveries == 1 and twin.resets_before == 0
    assert sum(k == "recovered" for k, _ in events) == 1


@pytest.mark.parametrize("limit", [0, 2])
def test_one_reset_more_than_the_limit_gives_up_in_one_line(limit):
    twin = HostileTwin()
    dev, _ = device(twin, max_in_a_row=limit)
    start(dev)
    twin.resets_before = limit + 1
    with pytest.raises(DeviceError) as e:
        dev.apply(seeds_of(0), COEFFS)
    assert str(e.value).startswith(f"{dev.name} reset {limit + 1} times in a row while recovering")
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_a_device_that_resets_on_every_command_is_given_up_after_the_default_limit():
    twin = HostileTwin()
    dev, _ = device(twin)
    start(dev)
    twin.resets_before = 10**6
    with pytest.raises(DeviceError, match=f"reset {MAX_RECOVERIES_IN_A_ROW + 1} times in a row"):
        dev.probe(slot=0, batch_size=8, batch_seed=0, eps=2, seeds=seeds_of(0))
    assert dev.recoveries == 0


def test_checkpoints_every_crc_every_updates_and_defaults():
    assert (CRC_EVERY, MAX_RECOVERIES_IN_A_ROW) == (100, 20)
    dev, _ = device(DeviceTwin())
    assert dev.crc_every == 100 and dev.max_in_a_row == 20 and dev.recoveries == 0
    start(dev)
    train(dev, range(3))
    assert dev.log.checkpoints == []
    dev3, _ = device(DeviceTwin(), crc_every=3)
    start(dev3)
    train(dev3, range(7))
    assert [a for a, _ in dev3.log.checkpoints] == [3, 6]
    assert dev3.log.last_checkpoint() == dev3.log.checkpoints[-1]
    assert UpdateLog().last_checkpoint() is None


def test_a_checkpoint_at_zero_updates_replays_from_the_start():
    want_crc, _ = reference(2)
    twin = HostileTwin()
    dev, _ = device(twin, crc_every=0)
    start(dev)
    assert dev.weights_crc()[1] == 0
    twin.reset()
    train(dev, range(2))
    assert dev.weights_crc() == (want_crc, 2) and dev.recoveries == 1


def test_the_log_keeps_its_own_copy_of_reused_arrays():
    want_crc, _ = reference(4)
    twin = HostileTwin()
    dev, _ = device(twin, crc_every=0)
    start(dev)
    seeds = np.empty(2, np.uint32)
    coeffs = np.empty(2, np.int32)
    for step in range(3):
        seeds[:] = seeds_of(step)
        coeffs[:] = COEFFS
        dev.apply(seeds, coeffs)
    seeds[:] = 0
    coeffs[:] = 0
    dev.apply([int(s) for s in seeds_of(3)], COEFFS.tolist())  # plain lists are logged too
    assert dev.log.steps[3][0].dtype == np.uint32 and dev.log.steps[3][1].dtype == np.int32
    twin.reset()
    assert dev.weights_crc() == (want_crc, 4)


def test_apply_probe_is_logged_and_replayed():
    want_crc, want_losses = reference(4)
    twin = HostileTwin()
    dev, _ = device(twin, crc_every=0)
    start(dev)
    train(dev, range(2))
    dev.probe(slot=0, batch_size=8, batch_seed=2, eps=2, seeds=seeds_of(2))
    probe = dev.apply_probe(
        seeds_of(2), COEFFS, slot=0, batch_size=8, batch_seed=3, eps=2, seeds=seeds_of(3)
    )
    np.testing.assert_array_equal(
        np.concatenate([probe.loss_plus, probe.loss_minus]), want_losses[3]
    )
    assert len(dev.log.steps) == 3
    twin.reset()
    dev.apply(seeds_of(3), COEFFS)
    assert dev.weights_crc() == (want_crc, 4) and dev.recoveries == 1


def test_a_new_model_starts_a_new_log():
    dev, _ = device(DeviceTwin(), crc_every=2)
    start(dev)
    train(dev, range(3))
    dev.load_model(BLOB)
    assert dev.log.steps == [] and dev.log.checkpoints == []
    dev.load_data(1, X[:8], Y[:8], 10)
    assert list(dev._slots) == [1]
    assert dev._slots[1] == data_blob.encode(X[:8], Y[:8], 10)


def test_restore_brings_a_fresh_device_to_a_logged_state():
    src, _ = device(DeviceTwin(), crc_every=2)
    start(src)
    train(src, range(4))
    crc, _ = src.weights_crc()
    fresh, events = device(DeviceTwin())
    fresh.restore(BLOB, dict(src._slots), src.log)
    assert fresh.weights_crc() == (crc, 4)
    (kind, detail) = next(e for e in events if e[0] in ("restored", "recovered"))
    assert kind == "restored" and "replayed 4 updates" in detail
    assert fresh._restoring is False


def test_a_shadow_that_disagrees_is_named_with_both_crcs():
    class Off:
        def __init__(self, blob: bytes) -> None:
            self.state = ModelState.from_blob(blob)

        def apply(self, seeds, coeffs):
            self.state.apply(seeds, np.asarray(coeffs) * 2)

        def weights_crc(self) -> int:
            return self.state.weights_crc()

    dev, _ = device(DeviceTwin(), crc_every=2, shadow=Off)
    start(dev)
    with pytest.raises(WeightsDiverged) as e:
        train(dev, range(2))
    assert str(e.value).startswith(f"after 2 updates {dev.name} holds weights with CRC 0x")


def test_the_wrapper_passes_the_inner_targets_properties_through():
    inner = direct_target(DeviceTwin())
    dev = RecoveringTarget(inner)
    assert dev.info is inner.info and dev.name == inner.name
    assert dev.events is inner.events  # one set of events: the client's
    seen = []
    with dev.events.command.subscribed(seen.append):
        dev.hello()
    assert seen and seen[-1].command == "HELLO"
    dev.hello()
    assert len(seen) == 1  # unsubscribed: heard no more
    heard = []
    dev.events.incident.subscribe(lambda incident: heard.append(incident.kind))
    inner.event("note", "x")
    assert heard == ["note"] and inner.stats["note"] == 1
    dev.close()


def test_every_recovery_is_counted():
    want_crc, _ = reference(4)
    twin = HostileTwin()
    dev, events = device(twin, crc_every=0)
    start(dev)
    train(dev, range(2))
    twin.reset()
    train(dev, range(2, 3))
    twin.reset()
    train(dev, range(3, 4))
    assert dev.recoveries == 2 and sum(k == "recovered" for k, _ in events) == 2
    assert dev.weights_crc() == (want_crc, 4)


@pytest.mark.parametrize(("steps", "crc_every"), [(1, 1), (6, 3)])
def test_a_drift_is_caught_at_a_checkpoint_of_one_and_at_the_last_step(steps, crc_every):
    twin = HostileTwin()
    twin.drift = True
    dev, _ = device(twin, crc_every=crc_every)
    start(dev)
    train(dev, range(steps))
    assert dev.log.last_checkpoint()[0] == steps == len(dev.log.steps)
    twin.reset()
    with pytest.raises(DeviceError, match=f"replaying {steps} updates gave weights CRC"):
        dev.weights_crc()


def test_count_errors_name_the_command_and_the_fix():
    twin = HostileTwin()
    dev, _ = device(twin)
    start(dev)
    train(dev, range(1))
    dev.probe(slot=0, batch_size=8, batch_seed=1, eps=2, seeds=seeds_of(1))
    twin.count_twice = True
    with pytest.raises(DeviceError) as e:
        dev.apply_probe(
            seeds_of(1), COEFFS, slot=0, batch_size=8, batch_seed=2, eps=2, seeds=seeds_of(2)
        )
    assert "reports 3 updates applied after APPLY_PROBE, the host acknowledged 2" in str(e.value)
    assert (
        e.value.fix == "the device applied an update twice or lost one: report this with the trace"
    )
    twin2 = HostileTwin()
    dev2, _ = device(twin2)
    start(dev2)
    twin2.resets_before = 2
    with pytest.raises(DeviceError) as e2:
        RecoveringTarget(dev2.target, max_in_a_row=1).weights_crc()
    assert e2.value.fix == "check the board's power supply and watchdog; the trace is valid so far"
