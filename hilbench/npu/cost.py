"""STM32N6 cost model: per-layer MACs and bytes, modeled latency on the Neural-ART NPU and on
the Cortex-M55 (Helium, CMSIS-NN).

Every duration from here is **modeled**, never measured: :class:`Modeled` carries
``source = "modeled"``, and callers must store and show it so (DESIGN.md, honest timing).

NPU: each layer (an "epoch") costs a fixed setup plus ``max(compute, memory)``, compute at
``NPU_MACS_PER_CYCLE * NPU_EFFICIENCY`` MACs per cycle, memory the weight bytes over the
bandwidth of where they live (on-chip SRAM or external PSRAM/flash over XSPI) plus activation
bytes over SRAM bandwidth (streaming overlaps the two). CPU: MACs over a per-op-kind rate in
MACs per cycle, plus a per-layer call overhead. What an op kind costs (its MACs, its
Cortex-M55 rate class) is in its registration (:mod:`hilbench.npu.registry`).

Calibration (docs/npu.md): the efficiencies are solved so that the calibration workload
:func:`person_detection_standin` reproduces the published STM32N6 person-detection figures quoted in
issue 3 — 1,251,021 NPU cycles at 800 MHz (about 1.56 ms) and about 227 ms on the
Cortex-M55 with CMSIS-NN at 600 MHz. The published model itself is not available offline;
the workload is a stand-in (our MobileNetV2 alpha 0.35 at 224x224, 2 classes, the usual
person-detection backbone), so absolute figures are uncertain to perhaps 2x; ratios
between models and batch sizes are what the model is for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from hilbench.npu import registry, zoo

# --- hardware facts -----------------------------------------------------------------------
NPU_CLOCK_HZ = 800e6  # Neural-ART as clocked in the calibration figure (up to 1 GHz)
NPU_MACS_PER_CYCLE = 300  # about 600 GOPS int8 at 1 GHz = 300 MAC per cycle
CPU_CLOCK_HZ = 600e6  # Cortex-M55 as clocked in the calibration figure (up to 800 MHz)
SRAM_BYTES_PER_S = 6.4e9  # on-chip AXI SRAM: 64-bit at 800 MHz
PSRAM_BYTES_PER_S = 0.8e9  # external PSRAM on XSPI1: 16-bit DDR at 200 MHz
SRAM_BYTES = int(4.2 * 2**20)

# --- calibrated (see module docstring) ----------------------------------------------------
NPU_EPOCH_CYCLES = 2000  # per layer: epoch programming and DMA setup (assumed)
NPU_EFFICIENCY = 0.2331  # fraction of peak MAC/cycle reached, solved on the stand-in
CPU_LAYER_CYCLES = 5000  # per layer: CMSIS-NN call, im2col setup (assumed)
CPU_MACS_PER_CYCLE = {"CONV_2D": 0.4919, "FULLY_CONNECTED": 0.4919}  # solved likewise
CPU_DEPTHWISE_FACTOR = 0.5  # depthwise and pools run at half the dense rate (assumed)
CPU_OTHER_CYCLES_PER_ELEMENT = 2.0  # ADD, MEAN, pools: cycles per output/input element

_MAC_RATES = ("dense", "depthwise")  # what forward_macs counts
PERSON_DETECTION_NPU_S = 1_251_021 / 800e6
PERSON_DETECTION_CPU_S = 0.227


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


@dataclass(frozen=True)
class Modeled:
    """A modeled duration (seconds) with its per-layer split; ``source`` is always
    ``"modeled"``."""

    seconds: float
    per_layer: tuple[float, ...]
    target: str
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
        macs = registry.get(op.kind).macs(graph, op)
        out.append(LayerCost(i, op.kind, y.name, int(macs), int(wbytes), in_bytes, n_out))
    return out


def forward_macs(graph: Any) -> int:
    """Multiply-accumulates of one forward pass of one input."""
    return sum(c.macs for c in layer_costs(graph) if registry.get(c.kind).cpu_rate in _MAC_RATES)


def npu_layer_seconds(c: LayerCost, inputs: int = 1, weights: str = "sram") -> float:
    """Modeled NPU seconds of one layer over ``inputs`` inputs (weights read once)."""
    if weights not in ("sram", "psram"):
        raise ValueError(f"weights must be 'sram' or 'psram', not {weights!r}")
    compute = c.macs * inputs / (NPU_MACS_PER_CYCLE * NPU_EFFICIENCY * NPU_CLOCK_HZ)
    wbw = SRAM_BYTES_PER_S if weights == "sram" else PSRAM_BYTES_PER_S
    memory = c.weight_bytes / wbw + (c.in_bytes + c.out_bytes) * inputs / SRAM_BYTES_PER_S
    return NPU_EPOCH_CYCLES / NPU_CLOCK_HZ + max(compute, memory)


def cpu_layer_seconds(c: LayerCost, inputs: int = 1) -> float:
    """Modeled Cortex-M55 (Helium, CMSIS-NN) seconds of one layer over ``inputs`` inputs."""
    dense = CPU_MACS_PER_CYCLE["CONV_2D"]
    rate = registry.get(c.kind).cpu_rate
    if rate == "dense":
        cycles = c.macs / CPU_MACS_PER_CYCLE.get(c.kind, dense)
    elif rate in ("depthwise", "pool"):
        cycles = c.macs / (dense * CPU_DEPTHWISE_FACTOR)
    else:
        cycles = (c.macs + c.out_bytes) * CPU_OTHER_CYCLES_PER_ELEMENT
    return (CPU_LAYER_CYCLES + cycles * inputs) / CPU_CLOCK_HZ


def npu_latency(graph: Any, *, inputs: int = 1, passes: int = 1, weights: str = "sram") -> Modeled:
    """Modeled NPU time of ``passes`` forward passes over a batch of ``inputs``; weights in
    on-chip ``"sram"`` or external ``"psram"``."""
    per = tuple(passes * npu_layer_seconds(c, inputs, weights) for c in layer_costs(graph))
    return Modeled(sum(per), per, f"STM32N6 NPU @ {NPU_CLOCK_HZ / 1e6:.0f} MHz ({weights})")


def cpu_latency(graph: Any, *, inputs: int = 1, passes: int = 1) -> Modeled:
    """Modeled Cortex-M55 time of ``passes`` forward passes over a batch of ``inputs``."""
    per = tuple(passes * cpu_layer_seconds(c, inputs) for c in layer_costs(graph))
    return Modeled(sum(per), per, f"STM32N6 Cortex-M55 @ {CPU_CLOCK_HZ / 1e6:.0f} MHz")


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


def person_detection_standin() -> Any:
    """The calibration workload: zoo MobileNetV2 (alpha 0.35, 224x224, 2 classes),
    58.0 M MACs, 64 layers, 0.41 MB of weights."""
    return zoo.build(
        "mobilenet_v2",
        seed=0,
        alpha=0.35,
        resolution=224,
        classes=2,
        calibration=_standin_calibration(),
    )


def _standin_calibration() -> Any:
    return np.random.default_rng(0).random((2, 224, 224, 3), dtype=np.float32)
