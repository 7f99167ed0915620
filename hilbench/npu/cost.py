"""STM32N6 cost model: per-layer MACs and bytes, and two labelled latency models of a forward
pass — what the firmware runs (the Cortex-M55) and a projection onto the Neural-ART NPU.

Every duration from here is **modeled**, never measured: :class:`Modeled` carries
``source = "modeled"`` and ``model``, the name of the timing model (:data:`TIMING_MODELS`),
and callers must store and show both (DESIGN.md, honest timing; docs/npu.md, cost model).

- ``m55`` (the default: every hilbench firmware runs its forward passes on the Cortex-M55):
  per op, instructions = call + per_mac * MACs + per_tap * taps + per_out * outputs, fitted
  (:data:`M55_FIT`) on QEMU ``-icount`` counts of the firmware's own Helium kernels
  (``benchmarks/calibrate_m55.py``), times a cycles-per-instruction figure (:data:`M55_CPI`),
  over the firmware's clock (600 MHz; the STM32N6 port's 800 MHz build option via
  ``clock_hz``).
- ``npu`` (a projection: the firmware's NPU plug point is a stub): per layer ("epoch") a fixed
  setup plus ``max(compute, memory)``, compute at ``NPU_MACS_PER_CYCLE * NPU_EFFICIENCY`` MACs
  per cycle, memory the weight bytes over the bandwidth of where they live (external flash on
  XSPI2 as on the STM32N6570-DK, on-chip SRAM or PSRAM) plus activation bytes over SRAM
  bandwidth. ``NPU_EFFICIENCY`` and ``NPU_EPOCH_CYCLES`` are fitted to ST's published
  STM32N6570-DK figures for MobileNetV2 int8 (:data:`ST_NPU_POINTS`).

What an op kind costs (its MACs, its Cortex-M55 rate class) is in its registration
(:mod:`hilbench.npu.registry`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from hilbench.npu import registry, zoo

# --- hardware facts -----------------------------------------------------------------------
SRAM_BYTES = int(4.2 * 2**20)  # the STM32N6's on-chip SRAM, all banks
#: the arena the STM32N6 port offers (device_fw/port/stm32n6/stm32n6.ld, docs/board.md)
N6_ARENA_BYTES = 3_833_856
PSRAM_BYTES = 32 * 2**20  # the STM32N6570-DK's HexaDeca-SPI PSRAM on XSPI1 (256 Mbit)
SRAM_BYTES_PER_S = 6.4e9  # on-chip AXI SRAM: 64-bit at 800 MHz
PSRAM_BYTES_PER_S = 0.8e9  # external PSRAM on XSPI1: 16-bit DDR at 200 MHz
FLASH_BYTES_PER_S = 0.4e9  # the DK's octo-SPI NOR flash on XSPI2: 8-bit DDR at 200 MHz
WEIGHT_HOMES = {"flash": FLASH_BYTES_PER_S, "sram": SRAM_BYTES_PER_S, "psram": PSRAM_BYTES_PER_S}

# --- the Cortex-M55 path (what the firmware runs) --------------------------------------------
M55_CLOCK_HZ = 600e6  # the STM32N6 port's default clock (800 MHz is a build option)
#: Per op kind, executed instructions of the firmware's Helium kernel (AN547_NN=mve) as
#: (call, per MAC, per tap, per output element); a tap is one output element times one kernel
#: position (CONV_2D: MACs over input channels). Non-negative least squares, relative error,
#: on 77 op shapes of the MLP, CNN and MobileNetV2 (a0.35 32x32, a0.5 48x48), measured at
#: commit 1032cc7: ``python benchmarks/calibrate_m55.py`` (QEMU 7.2 mps3-an547, -icount
#: shift=5, gcc 12.2 -O2). Fit error per op: ADD, FC, MEAN, RESHAPE within 0.1 %; CONV_2D
#: rms 18 % (max 47 %: 1x1 convs on one pixel, under-charged); DEPTHWISE_CONV_2D rms 25 %
#: (max 54 %: the 24x24 and 12x12 maps of a0.5 48x48, under-charged). Whole models, sum of
#: fitted ops against the measured blob: MLP +5.2 %, CNN +4.9 %, MobileNetV2 a0.35 32x32
#: +10.7 %, a0.5 48x48 -2.5 % (the previous fit, of older kernels: +6.4, +94, +79, +71 %).
M55_FIT: dict[str, tuple[float, float, float, float]] = {
    "ADD": (147.0, 19.9995, 0.0, 0.0),
    "CONV_2D": (2100.6, 0.23616, 2.5189, 9.7212),
    "DEPTHWISE_CONV_2D": (23026.2, 3.2759, 0.0, 0.0),
    "FULLY_CONNECTED": (422.7, 0.6125, 0.0, 18.027),
    "MEAN": (0.0, 5.5625, 0.0, 10.530),
    "RESHAPE": (0.0, 0.0, 0.0, 6.3359),
}
#: not measured (no zoo model has a pool): charged like MEAN per window element (assumed)
M55_FIT_ASSUMED = {"AVERAGE_POOL_2D": (0.0, 5.56, 0.0, 10.5), "MAX_POOL_2D": (0.0, 5.56, 0.0, 10.5)}
#: Cycles per executed instruction. The Cortex-M55 is an in-order core that retires at most
#: about one scalar instruction per cycle, and its Helium unit is *dual-beat*: a 128-bit vector
#: instruction is four beats executed two per cycle, so it occupies two cycles (Arm Cortex-M55
#: Technical Reference Manual, "beat-wise execution"; WikiChip, "Helium (MVE): lanes and
#: beats"). The kernels with a Helium path mix vector and scalar instructions, so they are
#: charged the midpoint, 1.5 (their true CPI lies in 1..2: the figure is +-33 %); the scalar
#: kernels 1.0 (memory stalls not charged: activations and weights in on-chip SRAM).
M55_CPI = {"CONV_2D": 1.5, "DEPTHWISE_CONV_2D": 1.5, "FULLY_CONNECTED": 1.5}
M55_CPI_SCALAR = 1.0
#: HEAD_GRAD beyond its batch of forward passes (core/zo/head.c, scalar C), in executed
#: instructions for a head of M outputs over K inputs: per item ``(per MK, per M)`` (the Q15
#: softmax and the outer product into the int32 accumulators), once per command ``(per MK,
#: per M)`` (the stochastically rounded update). Fitted on QEMU 7.2 mps3-an547 ``-icount``
#: counts of HEAD_GRAD at B = 8 and 32 minus B times an EVAL's instructions per item, on the
#: MLP (10 x 32) and the CNN (10 x 256) heads; a 64-256-10 MLP's head (not in the fit) is
#: within 3 % (tests/qemu/test_qemu_hybrid.py).
M55_HEAD_PER_ITEM = (5.81, 101.0)
M55_HEAD_UPDATE = (47.6, 223.0)

# --- the Neural-ART projection -----------------------------------------------------------------
NPU_CLOCK_HZ = 800e6  # Neural-ART clock assumed (up to 1 GHz); the fit absorbs it
NPU_MACS_PER_CYCLE = 300  # about 600 GOPS int8 at 1 GHz = 300 MAC per cycle
#: fitted (log error, scipy least_squares) to :data:`ST_NPU_POINTS` with weights in flash
NPU_EPOCH_CYCLES = 19_989  # per layer: epoch programming and DMA setup
NPU_EFFICIENCY = 0.07315  # fraction of peak MAC/cycle reached
#: ST model zoo, STM32N6570-DK, STM32Cube.AI 10.0.0 / ST Edge AI Core 2.0.0, "NPU/MCU",
#: MobileNetV2 int8, 101 classes: (alpha, resolution, ms, internal RAM KB, weights KB)
ST_NPU_POINTS = (
    (0.35, 128, 3.33, 240.0, 715.67),
    (0.35, 224, 6.12, 980.0, 730.7),
    (1.0, 224, 18.08, 2058.0, 3110.05),
)

_MAC_RATES = ("dense", "depthwise")  # what forward_macs counts


@dataclass(frozen=True)
class TimingModel:
    """A named model of a forward pass's duration."""

    key: str  # what RunConfig.timing_model and --timing-model take
    name: str  # what a trace and a report show
    what: str


TIMING_MODELS = {
    "m55": TimingModel(
        "m55",
        f"m55@{M55_CLOCK_HZ / 1e6:.0f}MHz",
        "the firmware's Helium kernels on the Cortex-M55 (QEMU -icount fit, CPI 1.5/1.0)",
    ),
    "npu": TimingModel(
        "npu",
        f"npu@{NPU_CLOCK_HZ / 1e6:.0f}MHz",
        "a projection onto the Neural-ART NPU (fit to ST's STM32N6570-DK figures)",
    ),
}
DEFAULT_TIMING_MODEL = "m55"


def timing_model(key: str, clock_hz: float | None = None) -> TimingModel:
    """The timing model ``key`` (``m55`` or ``npu``); ``clock_hz`` renames the M55's clock."""
    if key not in TIMING_MODELS:
        raise ValueError(f"unknown timing model {key!r}: use one of {', '.join(TIMING_MODELS)}")
    m = TIMING_MODELS[key]
    if key == "m55" and clock_hz is not None:
        return TimingModel(key, f"m55@{clock_hz / 1e6:.0f}MHz", m.what)
    return m


@dataclass(frozen=True)
class LayerCost:
    """One op's work for one input: multiply-accumulates and the bytes it touches."""

    index: int
    kind: str
    output: str
    macs: int
    weight_bytes: int
    in_bytes: int
    out_bytes: int
    taps: int = 0  # CONV_2D: output elements x kernel positions (MACs over input channels)


@dataclass(frozen=True)
class Modeled:
    """A modeled duration (seconds) with its per-layer split; ``source`` is always
    ``"modeled"``."""

    seconds: float
    per_layer: tuple[float, ...]
    target: str
    model: str = ""  # the timing model's name (TIMING_MODELS)
    source: str = "modeled"


def _prod(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape))


def layer_costs(graph: Any) -> list[LayerCost]:
    """MACs and bytes of every op of ``graph`` for one input."""
    out: list[LayerCost] = []
    t = graph.tensors
    for i, op in enumerate(graph.ops):
        y = t[op.outputs[0]]
        consts = [t[n] for n in op.inputs if t[n].data is not None]
        wbytes = sum(c.data.nbytes for c in consts)
        acts = [t[n] for n in op.inputs if t[n].data is None]
        in_bytes = sum(_prod(a.shape) for a in acts)
        n_out = _prod(y.shape)
        macs = int(registry.get(op.kind).macs(graph, op))
        taps = macs // max(1, t[op.inputs[0]].shape[-1]) if op.kind == "CONV_2D" else 0
        out.append(LayerCost(i, op.kind, y.name, macs, int(wbytes), in_bytes, n_out, taps))
    return out


def forward_macs(graph: Any) -> int:
    """Multiply-accumulates of one forward pass of one input."""
    return sum(c.macs for c in layer_costs(graph) if registry.get(c.kind).cpu_rate in _MAC_RATES)


def npu_layer_seconds(c: LayerCost, inputs: int = 1, weights: str = "flash") -> float:
    """Modeled NPU seconds of one layer over ``inputs`` inputs (weights read once) with the
    weights in external ``"flash"`` (as on the DK), on-chip ``"sram"`` or ``"psram"``."""
    if weights not in WEIGHT_HOMES:
        raise ValueError(f"weights must be one of {', '.join(WEIGHT_HOMES)}, not {weights!r}")
    compute = c.macs * inputs / (NPU_MACS_PER_CYCLE * NPU_EFFICIENCY * NPU_CLOCK_HZ)
    memory = (
        c.weight_bytes / WEIGHT_HOMES[weights]
        + (c.in_bytes + c.out_bytes) * inputs / SRAM_BYTES_PER_S
    )
    return NPU_EPOCH_CYCLES / NPU_CLOCK_HZ + max(compute, memory)


def m55_layer_instructions(c: LayerCost) -> float:
    """Modeled executed instructions of one layer for one input on the firmware's kernels."""
    call, per_mac, per_tap, per_out = M55_FIT.get(c.kind) or M55_FIT_ASSUMED[c.kind]
    return call + per_mac * c.macs + per_tap * c.taps + per_out * c.out_bytes


def m55_layer_seconds(c: LayerCost, inputs: int = 1, clock_hz: float = M55_CLOCK_HZ) -> float:
    """Modeled Cortex-M55 seconds of one layer over ``inputs`` inputs (one at a time, as the
    firmware runs them)."""
    cpi = M55_CPI.get(c.kind, M55_CPI_SCALAR)
    return inputs * m55_layer_instructions(c) * cpi / clock_hz


def npu_latency(graph: Any, *, inputs: int = 1, passes: int = 1, weights: str = "flash") -> Modeled:
    """Modeled NPU time of ``passes`` forward passes over a batch of ``inputs``; weights in
    external ``"flash"``, on-chip ``"sram"`` or ``"psram"``."""
    return npu_latency_of(layer_costs(graph), inputs=inputs, passes=passes, weights=weights)


def _runs(c: LayerCost, inputs: int, passes: int, once: int, once_inputs: int | None):
    """(passes, inputs) of layer ``c``: once over ``once_inputs`` (default ``inputs``) if it
    lies before the cut ``once`` (the frozen prefix, run once for the batch's items that
    need it: a prefix-cache entry made, or none kept), else ``passes`` times over ``inputs``."""
    if c.index < once:
        return (1, inputs if once_inputs is None else once_inputs)
    return passes, inputs


def npu_latency_of(
    costs: list[LayerCost],
    *,
    inputs: int = 1,
    passes: int = 1,
    weights: str = "flash",
    once: int = 0,
    once_inputs: int | None = None,
) -> Modeled:
    """:func:`npu_latency` from a graph's :func:`layer_costs`; the ops before ``once`` (a
    frozen prefix) run once, not ``passes`` times, over ``once_inputs`` (:func:`_runs`)."""

    def seconds(c: LayerCost) -> float:
        p, n = _runs(c, inputs, passes, once, once_inputs)
        return p * npu_layer_seconds(c, n, weights) if n else 0.0

    per = tuple(seconds(c) for c in costs)
    m = TIMING_MODELS["npu"]
    return Modeled(
        sum(per), per, f"STM32N6 Neural-ART NPU (projection, weights in {weights})", m.name
    )


def m55_latency(
    graph: Any, *, inputs: int = 1, passes: int = 1, clock_hz: float = M55_CLOCK_HZ
) -> Modeled:
    """Modeled Cortex-M55 time of ``passes`` forward passes over ``inputs`` inputs on the
    firmware's kernels at ``clock_hz``."""
    return m55_latency_of(layer_costs(graph), inputs=inputs, passes=passes, clock_hz=clock_hz)


def m55_latency_of(
    costs: list[LayerCost],
    *,
    inputs: int = 1,
    passes: int = 1,
    clock_hz: float = M55_CLOCK_HZ,
    once: int = 0,
    once_inputs: int | None = None,
) -> Modeled:
    """:func:`m55_latency` from a graph's :func:`layer_costs`; the ops before ``once`` (a
    frozen prefix) run once, not ``passes`` times, over ``once_inputs`` (:func:`_runs`)."""

    def seconds(c: LayerCost) -> float:
        p, n = _runs(c, inputs, passes, once, once_inputs)
        return p * m55_layer_seconds(c, n, clock_hz)

    per = tuple(seconds(c) for c in costs)
    name = timing_model("m55", clock_hz).name
    return Modeled(sum(per), per, f"STM32N6 Cortex-M55 @ {clock_hz / 1e6:.0f} MHz", name)


def m55_head_grad_seconds(m: int, k: int, batch: int, clock_hz: float = M55_CLOCK_HZ) -> float:
    """Modeled Cortex-M55 seconds of HEAD_GRAD's gradient and update for an ``m`` x ``k`` head
    over ``batch`` items (its forward passes apart: :func:`latency_of`)."""
    per_item = M55_HEAD_PER_ITEM[0] * m * k + M55_HEAD_PER_ITEM[1] * m
    update = M55_HEAD_UPDATE[0] * m * k + M55_HEAD_UPDATE[1] * m
    return (batch * per_item + update) * M55_CPI_SCALAR / clock_hz


def latency_of(
    costs: list[LayerCost],
    key: str,
    *,
    inputs: int = 1,
    passes: int = 1,
    once: int = 0,
    once_inputs: int | None = None,
) -> Modeled:
    """The modeled time of timing model ``key`` (``m55`` or ``npu``); the ops before
    ``once`` run once (a PROBE's frozen prefix, GraphIR.cut) over ``once_inputs`` of the
    ``inputs`` (default: all; fewer when the prefix cache holds the others), the rest
    ``passes`` times."""
    timing_model(key)
    kw = {"inputs": inputs, "passes": passes, "once": once, "once_inputs": once_inputs}
    if key == "npu":
        return npu_latency_of(costs, **kw)
    return m55_latency_of(costs, **kw)


#: the old name of the Cortex-M55 model
cpu_latency = m55_latency


def weight_placement(graph: Any) -> str:
    """Where the weights fit: ``"sram"`` if constants plus the largest activation pair fit
    the 4.2 MB on-chip SRAM, else ``"psram"``."""
    costs = layer_costs(graph)
    wbytes = sum(c.weight_bytes for c in costs)
    act = max((c.in_bytes + c.out_bytes for c in costs), default=0)
    return "sram" if wbytes + act <= SRAM_BYTES else "psram"


def npu_latency_s(macs_per_input: int, inputs: int, passes: int = 1) -> float:
    """Modeled NPU seconds from a MAC count alone (no layer structure): compute at the
    calibrated efficiency plus one epoch setup per pass. Kept for callers that only know
    MACs; prefer :func:`npu_latency`."""
    per_pass = NPU_EPOCH_CYCLES / NPU_CLOCK_HZ + macs_per_input * inputs / (
        NPU_MACS_PER_CYCLE * NPU_EFFICIENCY * NPU_CLOCK_HZ
    )
    return passes * per_pass


def st_point_graph(alpha: float, resolution: int) -> Any:
    """The zoo MobileNetV2 (101 classes) of one of ST's published points."""
    calib = np.random.default_rng(0).random((2, resolution, resolution, 3), dtype=np.float32)
    return zoo.build(
        "mobilenet_v2", seed=0, alpha=alpha, resolution=resolution, classes=101, calibration=calib
    )
