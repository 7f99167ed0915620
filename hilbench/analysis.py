"""What a model costs on the STM32N6 (``hilbench analyze``): per layer and in total its MACs,
parameters and activations; the device RAM of inference and of a ZO step per master and
perturbation, as the firmware places them in its arena (docs/firmware.md "Memory: one arena");
its flash; whether that fits the N6 port's on-chip arena or needs the PSRAM; and the modeled
latency of one forward pass on both labelled timing models of :mod:`hilbench.npu.cost`.

The memory figures are the ones ``benchmarks/bench_memory.py`` prints (it calls
:func:`model_memory`): the blob the device keeps (``pad16``), the activation plan's region
(:func:`hilbench.device.plan.act_bytes`, the mirror of device_fw/core/plan.c) and the ZO work
area (:func:`hilbench.zo.zocf.zo_work_bytes`, equal to the C's by the golden vectors).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hilbench.device import plan
from hilbench.npu import cost
from hilbench.npu.blob import to_blob
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables

MASTERS = ("int8", "int16", "q16")
PERTURBATIONS = ("fresh", "pool")  # fresh samples, or a pool of the longest trained row
GRAD_BYTES = 4  # backpropagation's int32 or fp32 gradient per trained weight


@dataclass(frozen=True)
class ModelMemory:
    """Device memory of one model, in bytes, as the firmware books it."""

    consts: int  # constant tensor data (weights, biases)
    infer_blob: int  # pad16(len(blob)) of the bare graph: what a device keeps to infer
    blob: int  # pad16(len(blob)) with LOSS and ZOCF: what the device keeps to train
    act: int  # the activation plan's region
    act_all: int  # every activation its own buffer (backprop keeps them all)
    trained: int  # trained weights (the default method: every weight tensor)
    row: int  # the longest trained row (L)
    work: dict[str, int]  # master -> zo_work_bytes (fresh samples)
    parts: dict[str, int]  # the int8 master's work area by part (zocf.memory_bytes)
    pool: int  # pad16(P) of a pool of P = the longest row

    @property
    def inference(self) -> int:
        """Arena bytes to infer: the bare blob and the activations."""
        return self.infer_blob + self.act

    def step(self, master: str, pool: bool = False) -> int:
        """Arena bytes of a ZO step with ``master`` (and a pool)."""
        return self.blob + self.act + self.work[master] + (self.pool if pool else 0)

    @property
    def backprop(self) -> int:
        """A lower bound for backpropagation: every activation kept, one gradient per
        trained weight."""
        return self.blob + self.act_all + GRAD_BYTES * self.trained


def model_memory(g: Any, cfg: zocf.ZoConfig | None = None) -> ModelMemory:
    """The memory of graph ``g`` with the default ZO method (every weight tensor, Rademacher,
    fresh samples); a graph without weights trains nothing."""
    consts = sum(t.data.nbytes for t in g.tensors.values() if t.data is not None)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    act = plan.act_bytes(g)
    act_all = sum(zocf.pad16(size) for _, size, _, _ in plan.lives(g))
    bare = zocf.pad16(len(to_blob(g)))
    # every weight tensor; a weightless model gets the default section (no entries)
    if cfg is None:
        cfg = zocf.build(g) if g.trainable() else zocf.ZoConfig()
    trained = zocf.resolve(cfg, g)
    blob = to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()})
    row = zocf.row_buffer_bytes(trained)
    return ModelMemory(
        consts=consts,
        infer_blob=bare,
        blob=zocf.pad16(len(blob)),
        act=act,
        act_all=act_all,
        trained=sum(t.size for t in trained if t.kind == "weight"),
        row=row,
        work={m: zocf.zo_work_bytes(cfg.replace(master=m), trained) for m in MASTERS},
        parts=zocf.memory_bytes(cfg.replace(master="int8"), trained),
        pool=zocf.pad16(row),
    )


def fit(arena_bytes: int) -> str:
    """``"sram"`` when ``arena_bytes`` fit the N6 port's on-chip arena, ``"psram"`` when they
    need the DK's 32 MB PSRAM, else ``"none"``."""
    if arena_bytes <= cost.N6_ARENA_BYTES:
        return "sram"
    return "psram" if arena_bytes <= cost.N6_ARENA_BYTES + cost.PSRAM_BYTES else "none"


@dataclass(frozen=True)
class Layer:
    index: int
    kind: str
    output: str
    shape: tuple[int, ...]
    macs: int
    params: int  # constant elements (weights and biases)
    activation: int  # output bytes (int8)
    m55_s: float
    npu_s: float


@dataclass(frozen=True)
class Latency:
    model: str  # the timing model's name (cost.TIMING_MODELS)
    what: str
    seconds: float


@dataclass(frozen=True)
class Analysis:
    name: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    layers: list[Layer]
    macs: int
    params: int
    activations: int  # sum of every layer's output bytes
    flash: int  # constant bytes (weights, biases): what a deployment stores in flash
    memory: ModelMemory
    ram: dict[str, int]  # "inference", "step/MASTER/PERTURBATION" -> arena bytes
    fits: dict[str, str]  # same keys -> sram | psram | none
    latency: dict[str, Latency]  # m55, npu
    arena: int = cost.N6_ARENA_BYTES
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["memory"] = {**asdict(self.memory), "inference": self.memory.inference}
        return d


def analyze(g: Any, name: str = "") -> Analysis:
    """Everything ``hilbench analyze`` reports about graph ``g``."""
    costs = cost.layer_costs(g)
    m55 = cost.m55_latency_of(costs)
    npu = cost.npu_latency_of(costs)
    t = g.tensors
    layers = []
    for c, op, tm, tn in zip(costs, g.ops, m55.per_layer, npu.per_layer, strict=True):
        params = sum(int(t[n].data.size) for n in op.inputs if t[n].data is not None)
        shape = tuple(int(d) for d in t[op.outputs[0]].shape)
        layers.append(Layer(c.index, c.kind, c.output, shape, c.macs, params, c.out_bytes, tm, tn))
    mem = model_memory(g)
    ram = {"inference": mem.inference}
    for master in MASTERS:
        if mem.trained:
            ram[f"step/{master}/fresh"] = mem.step(master)
            ram[f"step/{master}/pool"] = mem.step(master, pool=True)
    notes = []
    if not mem.trained:
        notes.append("no weight tensor: inference only (a ZO step trains nothing)")
    return Analysis(
        name=name or getattr(g, "name", "") or "model",
        input_shape=tuple(int(d) for d in g.input_shape),
        output_shape=tuple(int(d) for d in g.output_shape),
        layers=layers,
        macs=cost.forward_macs(g),
        params=sum(layer.params for layer in layers),
        activations=sum(layer.activation for layer in layers),
        flash=mem.consts,
        memory=mem,
        ram=ram,
        fits={k: fit(v) for k, v in ram.items()},
        latency={
            "m55": Latency(m55.model, cost.TIMING_MODELS["m55"].what, m55.seconds),
            "npu": Latency(npu.model, cost.TIMING_MODELS["npu"].what, npu.seconds),
        },
        notes=notes,
    )


def _kib(n: int) -> str:
    return f"{n / 1024:,.1f} KiB"


def _ms(s: float) -> str:
    return f"{s * 1e3:,.3f} ms" if s < 1 else f"{s:,.3f} s"


FIT_WORDS = {"sram": "fits on-chip SRAM", "psram": "needs the PSRAM", "none": "does not fit"}


def format_text(a: Analysis) -> str:
    """The report ``hilbench analyze`` prints."""
    dims = lambda s: "x".join(map(str, s))  # noqa: E731
    out = [
        f"{a.name}: input {dims(a.input_shape)} -> output {dims(a.output_shape)}, "
        f"{len(a.layers)} layers",
        "",
        f"  {'#':>3s} {'op':18s} {'output':14s} {'MACs':>12s} {'params':>10s} "
        f"{'act bytes':>10s} {'M55 ms':>9s} {'NPU ms':>8s}",
    ]
    for layer in a.layers:
        out.append(
            f"  {layer.index:3d} {layer.kind[:18]:18s} {dims(layer.shape)[:14]:14s} "
            f"{layer.macs:12,} {layer.params:10,} {layer.activation:10,} "
            f"{layer.m55_s * 1e3:9.3f} {layer.npu_s * 1e3:8.4f}"
        )
    out.append(
        f"  {'':3s} {'total':18s} {'':14s} {a.macs:12,} {a.params:10,} {a.activations:10,} "
        f"{a.latency['m55'].seconds * 1e3:9.3f} {a.latency['npu'].seconds * 1e3:8.4f}"
    )
    mem = a.memory
    out += [
        "",
        f"flash (weights and biases): {a.flash:,} B ({_kib(a.flash)}); hilbench's firmware "
        f"keeps them in its arena: blob {mem.infer_blob:,} B to infer, {mem.blob:,} B to train",
        f"RAM, as the firmware books its arena (the STM32N6 port offers {a.arena:,} B on chip):",
    ]
    for key, n in a.ram.items():
        if key == "inference":
            label = "inference (blob + activations)"
        else:
            label = "ZO step, master {}, {} perturbation".format(*key.split("/")[1:])
        out.append(f"  {label:44s} {n:12,} B {_kib(n):>14s}  {FIT_WORDS[a.fits[key]]}")
    out += [
        f"  (activations {mem.act:,} B, backprop lower bound {mem.backprop:,} B)",
        "",
        "modeled latency of one forward pass (modeled, not measured):",
    ]
    for lat in a.latency.values():
        out.append(f"  {lat.model:12s} {_ms(lat.seconds):>14s}  {lat.what}")
    out += [f"note: {n}" for n in a.notes]
    return "\n".join(out)


def fit_line(g: Any, cfg: zocf.ZoConfig | None = None) -> str:
    """One line on where a ZO step of ``g`` with ZO method ``cfg`` (default: every weight
    tensor, q16 master) and its inference fit on the STM32N6, for run summaries and reports."""
    mem = model_memory(g, cfg)
    master = (cfg or zocf.ZoConfig()).master
    step = mem.step(master)  # the work area of cfg, its pool included
    what = f"ZO step ({master} master)" if mem.trained else "inference"
    step = step if mem.trained else mem.inference
    return (
        f"{what} {_kib(step)}: {FIT_WORDS[fit(step)]}; inference {_kib(mem.inference)} "
        f"(STM32N6 arena {cost.N6_ARENA_BYTES:,} B)"
    )


def fit_line_of_blob(blob: bytes) -> str:
    """:func:`fit_line` of a model blob (a trace's ``model_blob``) with its own ZOCF."""
    from hilbench.npu.blob import from_blob

    graph, sections = from_blob(blob)
    return fit_line(graph, zocf.ZoConfig.from_sections(sections))
