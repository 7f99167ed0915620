"""The STM32N6 cost model: layer accounting, the two labelled timing models, the NPU
projection against ST's published STM32N6570-DK points, and the names traces and limits use."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from hilbench.npu import cost, zoo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trace"))
from trace_helpers import write_known_run


def test_layer_costs_count_macs_bytes_and_taps():
    g = zoo.build("cnn", seed=0)
    cs = cost.layer_costs(g)
    assert [c.kind for c in cs] == ["CONV_2D", "CONV_2D", "RESHAPE", "FULLY_CONNECTED"]
    # conv0: 8x8x8 outputs x 3x3x1 taps; conv1: 4x4x16 x 3x3x8; fc: 10 x 256
    assert [c.macs for c in cs] == [8 * 8 * 8 * 9, 4 * 4 * 16 * 72, 0, 2560]
    assert [c.taps for c in cs] == [8 * 8 * 8 * 9, 4 * 4 * 16 * 9, 0, 0]
    assert cs[0].weight_bytes == 72 + 4 * 8 and cs[3].weight_bytes == 2560 + 40
    assert cs[1].in_bytes == 512 and cs[1].out_bytes == 256
    assert cost.forward_macs(g) == 4608 + 18432 + 2560


def test_mlp_macs_unchanged():
    assert cost.forward_macs(zoo.build("mlp", seed=0)) == 64 * 32 + 32 * 10


@pytest.fixture(scope="module")
def st_points():
    return [(p, cost.layer_costs(cost.st_point_graph(p[0], p[1]))) for p in cost.ST_NPU_POINTS]


def test_npu_projection_within_25_percent_of_st_figures(st_points):
    for (alpha, res, ms, _ram, _w), costs in st_points:
        t = cost.npu_latency_of(costs)
        assert t.source == "modeled" and t.model == "npu@800MHz"
        assert t.seconds * 1e3 == pytest.approx(ms, rel=0.25), (alpha, res)
        assert len(t.per_layer) == len(costs) and sum(t.per_layer) == pytest.approx(t.seconds)


def test_activation_ram_of_the_small_point_is_st_figure(st_points):
    (_, _, _, ram_kib, _), costs = st_points[0]
    assert max(c.in_bytes + c.out_bytes for c in costs) / 1024 == pytest.approx(ram_kib, rel=0.05)


def test_m55_model_is_instructions_times_cpi_over_the_clock(st_points):
    costs = st_points[0][1]
    t = cost.m55_latency_of(costs)
    assert t.model == "m55@600MHz" and t.source == "modeled"
    instr = {c.kind: 0.0 for c in costs}
    for c in costs:
        instr[c.kind] += cost.m55_layer_instructions(c)
    cycles = sum(n * cost.M55_CPI.get(k, cost.M55_CPI_SCALAR) for k, n in instr.items())
    assert t.seconds == pytest.approx(cycles / 600e6)
    fast = cost.m55_latency_of(costs, clock_hz=800e6)
    assert fast.model == "m55@800MHz" and fast.seconds == pytest.approx(t.seconds * 0.75)
    # the firmware runs on the CPU: a forward pass there is far slower than the NPU projection
    assert t.seconds > 10 * cost.npu_latency_of(costs).seconds


def test_m55_fit_reproduces_the_kernels_measured_counts():
    """Op shapes and a whole model measured by benchmarks/calibrate_m55.py (QEMU -icount,
    Helium image, commit 1032cc7): the fit must stay within its stated error of them."""
    g = zoo.build("mobilenet_v2", seed=0, alpha=0.35, resolution=32)
    costs = cost.layer_costs(g)
    by_label = {}
    for c in costs:
        by_label.setdefault(c.kind, []).append(c)
    dw = by_label["DEPTHWISE_CONV_2D"][0]  # depthwise 3x3/1 16x16x16: 104,187 measured
    assert dw.macs == 36_864
    # the depthwise fit's worst rows are over 30 % off; this one is charged +38 %
    assert cost.m55_layer_instructions(dw) == pytest.approx(1.38 * 104_187, rel=0.02)
    add = by_label["ADD"][0]  # add 8x8x8: 10,387
    assert cost.m55_layer_instructions(add) == pytest.approx(10_387, rel=0.01)
    fc = by_label["FULLY_CONNECTED"][0]  # fc 1280>10: 8,443
    assert cost.m55_layer_instructions(fc) == pytest.approx(8_443, rel=0.01)
    # the whole forward pass: 1,717,121 measured, the fitted ops sum to +10.7 %
    whole = sum(cost.m55_layer_instructions(c) for c in costs)
    assert whole == pytest.approx(1.107 * 1_717_121, rel=0.01)


def test_psram_and_flash_weights_and_batching():
    g = zoo.build("mobilenet_v2", seed=0, alpha=0.35, resolution=64)
    sram = cost.npu_latency(g, weights="sram").seconds
    assert cost.npu_latency(g, weights="psram").seconds > sram
    assert cost.npu_latency(g).seconds >= cost.npu_latency(g, weights="psram").seconds
    assert cost.weight_placement(g) == "sram"
    one = cost.npu_latency(g, inputs=1).seconds
    many = cost.npu_latency(g, inputs=16).seconds
    assert one < many < 16 * one  # epoch setup and weights are paid once per batch
    assert cost.npu_latency(g, passes=4).seconds == pytest.approx(4 * one)
    assert cost.m55_latency(g, inputs=3).seconds == pytest.approx(3 * cost.m55_latency(g).seconds)
    with pytest.raises(ValueError, match="weights must be one of"):
        cost.npu_latency(g, weights="rom")


def test_npu_latency_s_from_macs():
    t = cost.npu_latency_s(1_000_000, inputs=8, passes=3)
    per = cost.NPU_EPOCH_CYCLES / cost.NPU_CLOCK_HZ + 8e6 / (
        cost.NPU_MACS_PER_CYCLE * cost.NPU_EFFICIENCY * cost.NPU_CLOCK_HZ
    )
    assert t == pytest.approx(3 * per)
    assert np.isfinite(cost.npu_latency_s(0, 1))


def test_timing_models_are_named_and_checked():
    assert cost.timing_model("m55").name == "m55@600MHz"
    assert cost.timing_model("npu").name == "npu@800MHz"
    with pytest.raises(ValueError, match="unknown timing model 'gpu'"):
        cost.timing_model("gpu")


@pytest.mark.parametrize("key", ["m55", "npu"])
def test_modeled_durations_name_their_model(tmp_path, key):
    """A run on the emulator: its trace names the model, and every modeled PROBE duration is
    that model's time of the step's forward passes."""
    from hilbench.config import RunConfig
    from hilbench.session import run
    from hilbench.trace import Trace

    cfg = RunConfig(budget=40, batch_size=4, scheduler="fixed:2", eval_every=10**6,
                    live=False, trace=tmp_path / "t.h5", timing_model=key)  # fmt: skip
    result = run(cfg)
    t = Trace.open(result.trace_path)
    assert t.attrs["timing_model"] == cost.timing_model(key).name
    costs = cost.layer_costs(zoo.build("mlp", seed=0))
    want = cost.latency_of(costs, key, inputs=4, passes=4).seconds  # q=2, two-point
    modeled = [
        r["duration_s"] for r in t.timing if (r["command"], r["source"]) == ("PROBE", "modeled")
    ]
    assert len(modeled) and np.allclose(modeled, int(want * 1e9) * 1e-9)


@pytest.mark.parametrize("key", ["m55", "npu"])
def test_a_modeled_probe_counts_the_frozen_prefix_once(tmp_path, key):
    """Training the last layer only: the twin's PROBE runs the first FC once for the batch
    (the frozen prefix) and the last one per pass; its modeled time says the same."""
    from hilbench.config import RunConfig
    from hilbench.session import run
    from hilbench.trace import Trace

    cfg = RunConfig(budget=40, batch_size=4, scheduler="fixed:2", eval_every=10**6, live=False,
                    trace=tmp_path / "t.h5", timing_model=key, layers="last:1")  # fmt: skip
    t = Trace.open(run(cfg).trace_path)
    costs = cost.layer_costs(zoo.build("mlp", seed=0))
    one = cost.latency_of(costs, key, inputs=4, passes=1).per_layer  # FC 0, FC 1: one pass
    want = one[0] + 4 * one[1]  # q = 2, two-point: 4 passes of the last FC, 1 of the prefix
    modeled = [
        r["duration_s"] for r in t.timing if (r["command"], r["source"]) == ("PROBE", "modeled")
    ]
    assert len(modeled) and np.allclose(modeled, int(want * 1e9) * 1e-9, rtol=1e-6)
    full = cost.latency_of(costs, key, inputs=4, passes=4).seconds
    assert max(modeled) < full - 2 * one[0]  # not the 4 full passes it counted before


def test_limits_on_modeled_time_name_the_model(tmp_path):
    from hilbench.trace import Trace
    from hilbench.trace.limits import Limit, LimitError, evaluate, measure

    named = tmp_path / "named.h5"
    w = write_known_run(named)  # APPLY 2 ms modeled
    assert w is not None
    import h5py

    with h5py.File(named, "r+") as f:
        run = f["runs"][sorted(f["runs"])[-1]]
        run.attrs["timing_model"] = "m55@600MHz"
    t = Trace.open(named)
    assert measure(t, "timing.APPLY.max@modeled:m55") == (pytest.approx(0.002), "s")
    with pytest.raises(LimitError, match=r"limits npu time, but .* modeled by m55@600MHz"):
        measure(t, "timing.APPLY.max@modeled:npu")
    with pytest.raises(LimitError, match="only modeled durations have one"):
        measure(t, "timing.PROBE.max@device:m55")
    old = tmp_path / "old.h5"
    write_known_run(old)
    with pytest.raises(LimitError, match="not named with its timing model"):
        measure(Trace.open(old), "timing.APPLY.max@modeled:m55")
    assert evaluate(t, Limit("timing.APPLY.max@modeled:m55", high=3e-3)).passed
    assert not evaluate(t, Limit("timing.APPLY.max@modeled:m55", high=1e-3)).passed
