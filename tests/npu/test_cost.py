"""The STM32N6 cost model: layer accounting, calibration points, and 'modeled' labels."""

import numpy as np
import pytest

from hilbench.npu import cost, zoo


@pytest.fixture(scope="module")
def standin():
    return cost.person_detection_standin()


def test_layer_costs_count_macs_and_bytes():
    g = zoo.build("cnn", seed=0)
    cs = cost.layer_costs(g)
    assert [c.kind for c in cs] == ["CONV_2D", "CONV_2D", "RESHAPE", "FULLY_CONNECTED"]
    # conv0: 8x8x8 outputs x 3x3x1 taps; conv1: 4x4x16 x 3x3x8; fc: 10 x 256
    assert [c.macs for c in cs] == [8 * 8 * 8 * 9, 4 * 4 * 16 * 72, 0, 2560]
    assert cs[0].weight_bytes == 72 + 4 * 8 and cs[3].weight_bytes == 2560 + 40
    assert cs[1].in_bytes == 512 and cs[1].out_bytes == 256
    assert cost.forward_macs(g) == 4608 + 18432 + 2560


def test_mlp_macs_unchanged():
    assert cost.forward_macs(zoo.build("mlp", seed=0)) == 64 * 32 + 32 * 10


def test_calibration_points(standin):
    assert cost.forward_macs(standin) == 58_008_368
    npu = cost.npu_latency(standin)
    cpu = cost.cpu_latency(standin)
    assert npu.source == cpu.source == "modeled"
    assert npu.seconds * 800e6 == pytest.approx(1_251_021, rel=0.005)  # 1.56 ms
    assert cpu.seconds == pytest.approx(0.227, rel=0.005)
    assert len(npu.per_layer) == len(standin.ops)
    assert sum(npu.per_layer) == pytest.approx(npu.seconds)


def test_psram_weights_and_batching_cost_more(standin):
    sram = cost.npu_latency(standin).seconds
    assert cost.npu_latency(standin, weights="psram").seconds > sram
    assert cost.weight_placement(standin) == "sram"
    one = cost.npu_latency(standin, inputs=1).seconds
    many = cost.npu_latency(standin, inputs=16).seconds
    assert one < many < 16 * one  # epoch setup is paid once per batch
    assert cost.npu_latency(standin, passes=4).seconds == pytest.approx(4 * one)


def test_npu_latency_s_from_macs():
    t = cost.npu_latency_s(1_000_000, inputs=8, passes=3)
    per = cost.NPU_EPOCH_CYCLES / cost.NPU_CLOCK_HZ + 8e6 / (
        cost.NPU_MACS_PER_CYCLE * cost.NPU_EFFICIENCY * cost.NPU_CLOCK_HZ
    )
    assert t == pytest.approx(3 * per)
    assert np.isfinite(cost.npu_latency_s(0, 1))
