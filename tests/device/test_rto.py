"""Retransmission timeouts that follow each request's work (docs/protocol.md, "Retries")."""

import threading
import time

import numpy as np
import pytest

from hilbench.backend.emulate import EmulatorBackend
from hilbench.client.device_client import ModelWork
from hilbench.client.rto import EXTRAPOLATION_MARGIN, PEAK_MARGIN, RtoEstimator, WorkTimer
from hilbench.device import DeviceTwin, ModelState
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.npu.cost import forward_macs
from hilbench.protocol import data_blob
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables


def test_a_measured_size_bounds_larger_and_smaller_requests():
    timer = WorkTimer(default_s=5.0, min_s=0.001)
    assert timer.first_wait(("probe", 100)) == 5.0  # never measured: the default
    for _ in range(20):
        timer.sample(("probe", 100), 0.010)
    r = timer.measured("probe")[100]
    assert r == pytest.approx(PEAK_MARGIN * 0.010)  # srtt 10 ms, no variation: 1.5 x the peak
    assert timer.first_wait(("probe", 100)) == r
    assert timer.first_wait(("probe", 40)) == r  # smaller: its own bound holds
    assert timer.first_wait(("probe", 5000)) == pytest.approx(EXTRAPOLATION_MARGIN * r * 50)
    # a second, larger size measured: a request between them uses the tighter bound
    for _ in range(20):
        timer.sample(("probe", 1000), 0.050)
    big = timer.measured("probe")[1000]
    assert timer.first_wait(("probe", 800)) == big  # not 2 * r * 8 = 0.16 s
    assert timer.first_wait(("probe", 100)) == r  # the short one keeps its own
    assert timer.first_wait(("eval", 100)) == 5.0  # kinds do not mix
    # before APPLY_PROBE is measured it waits for its parts, both measured
    for _ in range(20):
        timer.sample(("apply", 10), 0.002)
    a = timer.measured("apply")[10]
    parts = (("apply", 10), ("probe", 100))
    assert timer.first_wait(("apply_probe", 110), parts) == pytest.approx(
        EXTRAPOLATION_MARGIN * (a + r)
    )
    assert timer.first_wait(("apply_probe", 110), (("apply", 10), ("infer", 1))) == 5.0


def test_a_slow_round_trip_raises_the_timeout_for_a_while():
    est = RtoEstimator(min_s=0.001)
    for _ in range(50):
        est.sample(0.004)
    assert est.timeout() == pytest.approx(0.006)  # 1.5 x the steady 4 ms
    est.sample(0.020)  # a scheduling delay on a loaded host
    for _ in range(50):
        est.sample(0.004)
    # Jacobson alone is back near 4 ms after 50 samples; the decaying peak is not
    assert est.srtt + 4 * est.rttvar < 0.0045
    assert est.timeout() == pytest.approx(1.5 * 0.020 * 0.995**50)
    for _ in range(2000):
        est.sample(0.004)
    assert est.timeout() == pytest.approx(0.006)


def test_a_retried_answer_sets_the_estimate_until_a_clean_sample():
    timer = WorkTimer(default_s=0.5, min_s=0.001)
    timer.sample(("probe", 7), 1.3, retried=True)  # answered 1.3 s after the first try
    assert timer.first_wait(("probe", 7)) == pytest.approx(2.6)  # not the 0.5 s default again
    timer.sample(("probe", 7), 1.2)  # now a clean round trip: a real sample replaces it
    assert timer.measured("probe")[7] == pytest.approx(1.2 + 4 * 0.6)
    timer.sample(("probe", 7), 9.0, retried=True)  # Karn: a retried one no longer counts
    assert timer.measured("probe")[7] == pytest.approx(1.2 + 4 * 0.6)
    assert timer.wait(0.1, 0) == 0.1 and timer.wait(0.1, 2) == 0.4  # doubled per retry
    assert timer.wait(0.1, 9) == 0.5  # capped at max(default, 4 x first)
    assert timer.wait(2.0, 9) == 8.0


def _mlp_blob(one_sided: bool = False):
    g = zoo.build("mlp", seed=3)
    cfg = zocf.build(g, layers="all", estimator="one-sided" if one_sided else "two-point")
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    return g, to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()})


def test_the_work_of_a_model_is_read_from_its_blob():
    g, blob = _mlp_blob()
    work = ModelWork.from_blob(blob)
    assert work.macs == forward_macs(g) == 64 * 32 + 32 * 10
    assert work.trained == 64 * 32 + 32 + 32 * 10 + 10  # weights and biases of both layers
    assert work.probe_units(q=4, batch_size=8) == 2 * 4 * 8 * work.macs
    one = ModelWork.from_blob(_mlp_blob(one_sided=True)[1])
    assert one.one_sided and one.probe_units(q=4, batch_size=8) == 5 * 8 * one.macs
    assert ModelWork.from_blob(b"not a blob") == ModelWork()  # the device will refuse it
    assert ModelWork.from_blob(blob, macs=7).macs == 7


class SlowTwin(DeviceTwin):
    """A twin whose PROBE takes a real time proportional to its work (like a slow CPU), and
    that can lose the answer to its next PROBE (the answer is cached: a retry gets it)."""

    SECONDS_PER_PASS = 0.004

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.lose_next = threading.Event()

    def _run_probe(self, model, data, req):
        passes = 2 * len(req.seeds) * req.batch_size
        time.sleep(self.SECONDS_PER_PASS * passes)
        return super()._run_probe(model, data, req)

    def _eval(self, req):
        time.sleep(self.SECONDS_PER_PASS * req.count)
        return super()._eval(req)

    def handle(self, frame):
        answer = super().handle(frame)
        if frame.type == 0x04 and answer and self.lose_next.is_set():
            self.lose_next.clear()
            return b""  # the answer is lost on the way back
        return answer


def test_a_long_command_is_not_retried_and_a_lost_short_answer_is_retried_promptly():
    _, blob = _mlp_blob()
    twin = SlowTwin()
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (16, 64)).astype(np.int8)
    y = rng.integers(0, 10, 16).astype(np.uint8)
    # compile the kernels first (the first forward pass of a process can take a second)
    ModelState.from_blob(blob).probe(x[:1], y[:1], np.array([1], np.uint32), 2)
    with EmulatorBackend(twin=twin, link="pty") as target:
        target.load_model(blob)
        target.load_data_blob(0, data_blob.encode(x, y, 10))

        def probe(q: int, batch: int) -> float:
            seeds = np.arange(1, q + 1, dtype=np.uint32)
            t0 = time.perf_counter()
            target.probe(slot=0, batch_size=batch, batch_seed=1, eps=2, seeds=seeds)
            return time.perf_counter() - t0

        def resent() -> int:  # tries sent again, lost or late (settled: no duplicate pends)
            target.settle()
            return target.stats["retry"] + target.stats["late"]

        short = [probe(1, 1) for _ in range(6)]  # 2 passes: 8 ms of device time each
        assert resent() == 0
        long_s = probe(25, 2)  # 100 passes: 50x the work, 0.4 s
        assert long_s >= 50 * 2 * SlowTwin.SECONDS_PER_PASS
        assert resent() == 0, "a long command was retried on a clean link"
        # the long command's bound must not leak into the short one's: a lost answer is
        # retried after about the short command's own round trip
        twin.lose_next.set()
        lost_s = probe(1, 1)
        assert resent() == 1 and target.stats["retry"] == 1
        assert lost_s < long_s / 2, (lost_s, long_s, short)
        # issue 14: the first EVAL (a kind not measured yet) is not held to the fast
        # commands' timeouts, and the last, shorter one is bounded by the first
        t0 = time.perf_counter()
        target.evaluate(0, 16, chunk=12)  # EVAL of 12 items (48 ms), then of 4 (16 ms)
        assert time.perf_counter() - t0 >= 16 * SlowTwin.SECONDS_PER_PASS
        assert resent() == 1  # the lost PROBE answer's, no other
