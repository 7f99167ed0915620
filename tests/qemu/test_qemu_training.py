"""The firmware on the Cortex-M55 (QEMU) and the twin are the same device (issue 12): runs on
both give the same loss pairs at every step and the same final weights (MLP two-point, CNN
one-sided); every request type, a RESET included, answers as the twin's does; a run through
injected link faults and device resets ends with the clean run's weights. Durations under
-icount are executed instructions, stored as their own source."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench import session
from hilbench.backend.emulate import EmulatorBackend
from hilbench.backend.qemu import QemuBackend
from hilbench.client.device_client import DeviceReset
from hilbench.config import RunConfig
from hilbench.device import DeviceTwin
from hilbench.errors import DeviceError
from hilbench.link.faults import FaultSpec
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.trace import Trace
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables

# (model, settings)
# (the MLP with the two-point estimator: test_qemu_sample.py, 12,000 forward passes)
#: the schedule these runs use unless a case sets its own: q = 4, so that every step holds
#: several samples (the aggregation, the per-sample rows); the weights CRCs pinned in this
#: directory were recorded with it (hilbench run's default was fixed:4 at lr 175 until the
#: widened study made it fixed:1 at lr 50)
SCHEDULE = {"scheduler": "fixed:4", "lr": 175.0}

MATRIX = [
    ("cnn", {"estimator": "one-sided", "perturbation": "gaussian", "master": "int16"}),
    # ``hilbench run``'s own schedule and rate (q = 1: one sample a step)
    ("mlp", {"scheduler": RunConfig().scheduler, "lr": RunConfig().lr}),
]


def _run(backend: str, model: str, settings: dict, tmp_path, elf, **extra) -> tuple:
    config = RunConfig(
        backend=backend,
        firmware=str(elf) if backend == "qemu" else None,
        model=model,
        budget=settings.get("budget", 320),
        eval_every=160,
        seed=5,
        live=False,
        trace=tmp_path / f"{backend}-{len(list(tmp_path.iterdir()))}.h5",
        **{**SCHEDULE, **{k: v for k, v in settings.items() if k != "budget"}},
        **extra,
    )
    result = session.run(config)
    return result, Trace.open(result.trace_path)


@pytest.mark.parametrize(("model", "settings"), MATRIX, ids=lambda v: str(v) or "default")
def test_same_losses_and_weights_as_the_twin(model, settings, tmp_path, an547_elf):
    twin_result, twin = _run("emulate", model, settings, tmp_path, an547_elf)
    qemu_result, qemu = _run("qemu", model, settings, tmp_path, an547_elf)
    assert qemu_result.backend == "qemu" and twin_result.backend == "emulate"
    assert len(qemu.samples) == len(twin.samples) > 0
    for field in ("seed", "loss_plus", "loss_minus", "coeff"):
        np.testing.assert_array_equal(qemu.samples[field], twin.samples[field], err_msg=field)
    assert qemu_result.weights_crc == twin_result.weights_crc
    np.testing.assert_array_equal(qemu.evals["accuracy"], twin.evals["accuracy"])
    # -icount: durations are executed instructions, their own source, never seconds
    timing = qemu.timing
    assert set(timing["source"]) == {"host", "instr"}
    probes = timing[(timing["source"] == "instr") & (timing["command"] == "APPLY_PROBE")]
    assert len(probes) > 0
    counts = probes["duration_s"]
    assert np.all(counts == np.round(counts)) and counts.min() > 10_000
    # every step does the same work: the counts agree to a few ticks of 31.25 instructions
    assert counts.max() - counts.min() < 0.02 * counts.mean()
    assert "instr" not in set(twin.timing["source"])


def _blob() -> tuple[bytes, int, int]:
    g = zoo.build("cnn", seed=4)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    cfg = zocf.build(g, layers="last:2")
    blob = to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()})
    return blob, int(np.prod(g.input_shape)), int(np.prod(g.output_shape))


def _every_request(target) -> list:
    """Each of the twelve request types, a RESET and what follows it; the answers with their
    timing fields left out."""
    blob, item, classes = _blob()
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (10, item)).astype(np.int8)
    y = rng.integers(0, classes, 10).astype(np.uint8)
    seeds = np.array([11, 22, 33], np.uint32)
    batch = dict(slot=0, batch_size=4, batch_seed=99, eps=2)
    out: list = [target.load_model(blob), target.load_data(0, x, y, classes)]
    probe = target.probe(seeds=seeds, **batch)  # PROBE
    out.append((probe.loss_plus.tolist(), probe.loss_minus.tolist()))
    out.append(target.apply(seeds, np.array([900, -700, 500], np.int32)))  # APPLY_PROBED
    out.append(target.apply(seeds + 1, np.array([300, 200, -100], np.int32)))  # APPLY
    probe = target.probe(seeds=seeds + 2, **batch)
    applied, probe = target.apply_probe(  # APPLY_PROBE
        seeds + 2, np.array([50, -60, 70], np.int32), seeds=seeds + 3, **batch
    )
    out.append((applied, probe.loss_plus.tolist(), probe.loss_minus.tolist()))
    steps = [(seeds + 4, np.array([10, 20, 30], np.int32)), (seeds + 5, np.array([-5, 5, -5]))]
    out.append(target.apply_batch(steps))  # APPLY_BATCH
    out.append(target.evaluate(0, 10))  # EVAL
    out.append(target.weights_crc())  # WEIGHTS_CRC
    out.append(target.infer(slot=0, index=3).output.tolist())  # INFER, a slot's item
    out.append(target.infer(input=x[5]).output.tolist())  # INFER, an input in the request
    with pytest.raises(DeviceError) as head:  # HEAD_GRAD: this ZOCF trains the head (last:2)
        target.head_grad(
            slot=0,
            batch_size=4,
            batch_seed=99,
            round_seed=1,
            rates=np.full(classes, 9000, np.int32),
            bias_gain=16,
        )
    out.append(str(head.value).split(" refused ", 1)[1])
    nonce = target.info.boot_nonce
    target.reset()  # RESET: the device reboots
    with pytest.raises(DeviceReset):
        target.weights_crc()  # no session after the reboot: NO_SESSION
    info = target.hello()  # HELLO again: a new boot nonce
    out.append(info.boot_nonce != nonce)
    with pytest.raises(DeviceError) as gone:
        target.weights_crc()  # the model is gone: NO_MODEL, the device's own words
    out.append(str(gone.value).split(" refused ", 1)[1])
    return out


def test_every_request_type_and_a_reset_answer_as_the_twin(an547_elf):
    answers = []
    for backend in (EmulatorBackend(DeviceTwin(modeled_timing=False)), QemuBackend(an547_elf)):
        with backend as target:
            answers.append(_every_request(target))
    twin, qemu = answers
    assert qemu == twin
    assert twin[-2] is True and "NO_MODEL" in twin[-1]


class _ResettingQemu(QemuBackend):
    """QEMU behind the --link-faults injector, which also resets the device (through its own
    reset path, a RESET around the injector) before the host frames numbered in ``at``: the
    resets come at fixed points whatever the seeded frame faults do to the timing."""

    def __init__(self, elf, faults: FaultSpec, at: tuple[int, ...]) -> None:
        super().__init__(str(elf), faults, icount=False)  # uploads are faster without icount
        self.at = at

    def _attach(self, port, name, **options):
        connection = super()._attach(port, name, **options)
        injector = connection.client.port
        write, count = injector.write, [0]

        def write_and_reset(data: bytes) -> int:
            count[0] += 1
            if count[0] in self.at:
                injector._fault("reset", "device reset before a host frame (scheduled)")
                injector.reset_device()
            return write(data)

        injector.write = write_and_reset
        return connection


def test_link_faults_and_resets_end_with_the_clean_weights(tmp_path, an547_elf):
    clean, _ = _run("emulate", "mlp", {"budget": 400}, tmp_path, an547_elf)
    spec = "drop=0.01,corrupt=0.01,duplicate=0.01,delay=0.01,truncate=0.01,seed=3"
    config = RunConfig(
        backend="qemu",
        budget=400,
        eval_every=320,
        seed=5,
        live=False,
        link_faults=spec,
        trace=tmp_path / "faulty.h5",
        **SCHEDULE,
    )
    backend = _ResettingQemu(an547_elf, FaultSpec.parse(spec), at=(45, 70))
    faulty = session.run(config, backend=backend)
    assert faulty.weights_crc == clean.weights_crc
    events = Trace.open(faulty.trace_path).event_counts()
    # two reboots noticed; the second may land in the first's recovery, which starts over
    assert events.get("reset", 0) == 2 and 1 <= events.get("recovered", 0) <= 2, events
    assert events.get("injected", 0) >= 4, events
