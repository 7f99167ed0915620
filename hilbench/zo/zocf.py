"""The ``ZOCF`` model-blob section: how the device perturbs, estimates and updates.

PROBE and APPLY keep their wire layout; everything else the device needs to know about the
ZO method travels once, in the model blob (``to_blob(graph, {"LOSS": ..., "ZOCF": ...})``).
A blob without ``ZOCF`` means the defaults (Rademacher, two-point, nearest, Q16 master, every
weight tensor). Byte layout (little-endian, docs/zo-math.md):

    header, 20 bytes
      0  u8  version (1)          1  u8 distribution      2  u8 scaling     3  u8 estimator
      4  u8  rounding             5  u8 master            6  u16 n_entries
      8  u32 pool_size            12 u32 pool_seed        16 u32 reserved (0)
    n_entries entries, each 8 + pad4(n) bytes
      0  u16 tensor index         2  u8 eps_mult (Q4)     3  u8 unit_shift
      4  u16 n (0, or shape[0])   6  u16 reserved (0)     8  u8[n] channel eps_mult (Q4)
"""

from __future__ import annotations

import fnmatch
import math
import struct
from dataclasses import dataclass, field, replace

import numpy as np

from hilbench.zo import perturb, update

VERSION = 1
TWO_POINT, ONE_SIDED = 0, 1
ESTIMATORS = {"two-point": TWO_POINT, "one-sided": ONE_SIDED}
ESTIMATOR_NAMES = {v: k for k, v in ESTIMATORS.items()}
MAX_UNIT_SHIFT = 12
MAX_Q = 510
BIAS_UNIT_SHIFT = 8  # a bias LSB is s_in * s_w: one eps of a bias moves it 2^8 bias LSBs
ONE = 1 << perturb.MULT_FRAC  # eps multiplier 1.0 in Q4

_HEADER = struct.Struct("<BBBBBBHIII")
_ENTRY = struct.Struct("<HBBHH")


class ZocfError(ValueError):
    """A ZOCF section that is malformed or does not fit the model."""


@dataclass(frozen=True)
class TensorZo:
    """One trainable tensor: its index in the blob's tensor table and its eps scaling."""

    index: int
    eps_mult: int = ONE  # Q4, 1..255
    unit_shift: int = 0  # stored LSBs per perturbation unit = 2^unit_shift
    channel_mult: tuple[int, ...] = ()  # Q4 per row (axis 0); empty = eps_mult for all


@dataclass(frozen=True)
class ZoConfig:
    """What the device does on PROBE and APPLY; serialised as the ZOCF section."""

    distribution: str = "rademacher"
    scaling: str = "fixed"
    estimator: str = "two-point"
    rounding: str = "nearest"
    master: str = "q16"
    pool_size: int = 0
    pool_seed: int = 0
    tensors: tuple[TensorZo, ...] = field(default_factory=tuple)  # empty: every weight

    def __post_init__(self) -> None:
        for name, value, table in (
            ("distribution", self.distribution, perturb.DISTRIBUTIONS),
            ("scaling", self.scaling, perturb.SCALINGS),
            ("estimator", self.estimator, ESTIMATORS),
            ("rounding", self.rounding, update.ROUNDINGS),
            ("master", self.master, update.MASTERS),
        ):
            if value not in table:
                raise ZocfError(f"{name} {value!r} unknown; use one of {sorted(table)}")
        if not 0 <= self.pool_size <= perturb.MAX_POOL:
            raise ZocfError(f"pool size {self.pool_size} outside 0..{perturb.MAX_POOL}")
        if not 0 <= self.pool_seed < 2**32:
            raise ZocfError(f"pool seed {self.pool_seed} is not a u32")

    # codes
    @property
    def dist_code(self) -> int:
        return perturb.DISTRIBUTIONS[self.distribution]

    @property
    def scaling_code(self) -> int:
        return perturb.SCALINGS[self.scaling]

    @property
    def one_sided(self) -> bool:
        return self.estimator == "one-sided"

    @property
    def rounding_code(self) -> int:
        return update.ROUNDINGS[self.rounding]

    @property
    def master_code(self) -> int:
        return update.MASTERS[self.master]

    def replace(self, **changes) -> ZoConfig:
        return replace(self, **changes)

    # bytes
    def to_bytes(self) -> bytes:
        out = bytearray(
            _HEADER.pack(
                VERSION,
                self.dist_code,
                self.scaling_code,
                ESTIMATORS[self.estimator],
                self.rounding_code,
                self.master_code,
                len(self.tensors),
                self.pool_size,
                self.pool_seed,
                0,
            )
        )
        for t in self.tensors:
            out += _ENTRY.pack(t.index, t.eps_mult, t.unit_shift, len(t.channel_mult), 0)
            cm = bytes(t.channel_mult)
            out += cm + b"\0" * (-len(cm) % 4)
        return bytes(out)

    @classmethod
    def from_bytes(cls, data: bytes) -> ZoConfig:
        data = bytes(data)
        if len(data) < _HEADER.size:
            raise ZocfError(f"ZOCF section is {len(data)} bytes, the header needs {_HEADER.size}")
        ver, dist, scal, est, rnd, mst, n, psize, pseed, res = _HEADER.unpack_from(data, 0)
        if ver != VERSION:
            raise ZocfError(f"ZOCF version {ver}, this build reads {VERSION}")
        if res != 0:
            raise ZocfError("ZOCF reserved header word is not 0")
        names = []
        for what, code, table in (
            ("distribution", dist, perturb.DISTRIBUTION_NAMES),
            ("scaling", scal, {v: k for k, v in perturb.SCALINGS.items()}),
            ("estimator", est, ESTIMATOR_NAMES),
            ("rounding", rnd, {v: k for k, v in update.ROUNDINGS.items()}),
            ("master", mst, update.MASTER_NAMES),
        ):
            if code not in table:
                raise ZocfError(f"ZOCF {what} code {code} unknown")
            names.append(table[code])
        pos = _HEADER.size
        tensors = []
        for i in range(n):
            if pos + _ENTRY.size > len(data):
                raise ZocfError(f"ZOCF truncated in entry {i}")
            index, mult, shift, nch, res2 = _ENTRY.unpack_from(data, pos)
            pos += _ENTRY.size
            padded = nch + (-nch % 4)
            if pos + padded > len(data):
                raise ZocfError(f"ZOCF truncated in entry {i}'s channel multipliers")
            cm = tuple(data[pos : pos + nch])
            if res2 != 0 or any(data[pos + nch : pos + padded]):
                raise ZocfError(f"ZOCF entry {i}: reserved or padding bytes are not 0")
            pos += padded
            tensors.append(TensorZo(index, mult, shift, cm))
        if pos != len(data):
            raise ZocfError(f"ZOCF has {len(data) - pos} unexpected trailing bytes")
        return cls(*names, pool_size=psize, pool_seed=pseed, tensors=tuple(tensors))


# --- resolving against a model -----------------------------------------------------------------
@dataclass(frozen=True)
class Trainable:
    """A trainable tensor as the device sees it, in PRNG tensor order."""

    name: str
    kind: str  # "weight" (int8) or "bias" (int32)
    shape: tuple[int, ...]
    eps_mult: int | np.ndarray  # Q4 scalar, or int64 per row
    unit_shift: int

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _tensor_kinds(graph) -> dict[str, str]:
    kinds: dict[str, str] = {}
    for w, b in graph.weight_tensors():
        kinds[w] = "weight"
        if b is not None:
            kinds[b] = "bias"
    return kinds


def resolve(config: ZoConfig, graph) -> list[Trainable]:
    """The trainable tensors ``config`` names in ``graph``; ZocfError if they do not fit."""
    names = list(graph.tensors)
    kinds = _tensor_kinds(graph)
    entries = config.tensors or tuple(
        TensorZo(names.index(n)) for n, k in kinds.items() if k == "weight"
    )
    if not entries:
        raise ZocfError("ZOCF names no trainable tensor")
    seen: set[int] = set()
    out = []
    for i, e in enumerate(entries):
        if e.index >= len(names):
            raise ZocfError(f"ZOCF entry {i}: tensor index {e.index} >= {len(names)} tensors")
        if e.index in seen:
            raise ZocfError(f"ZOCF entry {i}: tensor {names[e.index]} listed twice")
        seen.add(e.index)
        name = names[e.index]
        kind = kinds.get(name)
        t = graph.tensors[name]
        if kind is None or t.data is None:
            raise ZocfError(f"ZOCF entry {i}: tensor {name} is not a weight or bias of an op")
        if t.dtype != ("int8" if kind == "weight" else "int32"):
            raise ZocfError(f"ZOCF entry {i}: {kind} {name} has dtype {t.dtype}")
        if not 1 <= e.eps_mult <= 255:
            raise ZocfError(f"ZOCF entry {i}: eps_mult {e.eps_mult} outside 1..255")
        if not 0 <= e.unit_shift <= MAX_UNIT_SHIFT:
            raise ZocfError(f"ZOCF entry {i}: unit_shift {e.unit_shift} outside 0..12")
        if kind == "weight" and e.unit_shift != 0:
            raise ZocfError(f"ZOCF entry {i}: int8 weights {name} need unit_shift 0")
        mult: int | np.ndarray = e.eps_mult
        if e.channel_mult:
            if len(e.channel_mult) != t.shape[0]:
                raise ZocfError(
                    f"ZOCF entry {i}: {len(e.channel_mult)} channel multipliers for "
                    f"{name} with {t.shape[0]} rows"
                )
            if min(e.channel_mult) < 1:
                raise ZocfError(f"ZOCF entry {i}: a channel eps_mult is 0")
            mult = np.asarray(e.channel_mult, dtype=np.int64)
        if config.pool_size:
            _, length = perturb.rows_of(t.shape)
            if length > config.pool_size:
                raise ZocfError(
                    f"pool of {config.pool_size} is shorter than a row of {name} "
                    f"({length} elements), so the row would repeat at a fixed distance"
                )
        out.append(Trainable(name, kind, tuple(t.shape), mult, e.unit_shift))
    return out


def select_tensors(graph, spec: str) -> list[str]:
    """Tensor names a layer selection picks, in graph order.

    Terms, comma-separated, united: ``weights`` (every weight tensor), ``biases`` (every
    bias), ``all`` (both), ``last:K`` (weights and biases of the last K layers), or a glob
    on tensor names (``fc1_*``). Raises ValueError when a term or the whole matches nothing."""
    layers = graph.weight_tensors()
    kinds = _tensor_kinds(graph)
    chosen: set[str] = set()
    for term in (t.strip() for t in spec.split(",")):
        if not term:
            raise ValueError(f"empty term in layer selection {spec!r}")
        if term == "weights":
            picked = {w for w, _ in layers}
        elif term == "biases":
            picked = {b for _, b in layers if b is not None}
        elif term == "all":
            picked = set(kinds)
        elif term.startswith("last:"):
            try:
                k = int(term[5:])
            except ValueError:
                k = 0
            if not 1 <= k <= len(layers):
                raise ValueError(f"{term!r}: K must be in 1..{len(layers)} (layers with weights)")
            picked = {n for pair in layers[-k:] for n in pair if n is not None}
        else:
            picked = {n for n in kinds if fnmatch.fnmatchcase(n, term)}
        if not picked:
            raise ValueError(
                f"layer selection term {term!r} matches no trainable tensor "
                f"(trainable: {', '.join(kinds)})"
            )
        chosen |= picked
    return [n for n in graph.tensors if n in chosen]


def scale_aware_channel_mults(graph, name: str) -> tuple[int, ...]:
    """Per-row Q4 multipliers ~ median(scale) / scale_row (clipped to 1..255): rows with
    coarse quantization get proportionally smaller LSB perturbations, so every row moves a
    similar real amount."""
    s = np.asarray(graph.tensors[name].qparams.scale, dtype=np.float64)
    if s.size <= 1:
        return ()
    m = np.clip(np.rint(ONE * np.median(s) / s), 1, 255).astype(int)
    return tuple(int(v) for v in m)


def build(
    graph,
    *,
    layers: str = "weights",
    distribution: str = "rademacher",
    scaling: str | None = None,
    estimator: str = "two-point",
    rounding: str = "nearest",
    master: str = "q16",
    pool_size: int = 0,
    pool_seed: int = 0,
    eps_mults: dict[str, float] | None = None,
    per_channel: bool = False,
) -> ZoConfig:
    """A ZoConfig for ``graph`` from host-side names (ValueError on a bad selection).

    ``scaling`` defaults to PeZO's adaptive scaling for ``uniform``, fixed otherwise;
    ``eps_mults`` maps globs on tensor names to multipliers (e.g. {"fc0_*": 0.5})."""
    names = list(graph.tensors)
    kinds = _tensor_kinds(graph)
    picked = select_tensors(graph, layers)
    if scaling is None:
        scaling = "adaptive" if distribution == "uniform" else "fixed"
    entries = []
    for n in picked:
        mult = 1.0
        for pattern, value in (eps_mults or {}).items():
            if fnmatch.fnmatchcase(n, pattern):
                mult = value
        q4 = round(mult * ONE)
        if not 1 <= q4 <= 255:
            raise ValueError(f"eps multiplier {mult} for {n} outside 1/16..15.9")
        shift = BIAS_UNIT_SHIFT if kinds[n] == "bias" else 0
        cm = scale_aware_channel_mults(graph, n) if per_channel and kinds[n] == "weight" else ()
        if cm:
            cm = tuple(int(np.clip(round(c * q4 / ONE), 1, 255)) for c in cm)
        entries.append(TensorZo(names.index(n), q4, shift, cm))
    for pattern in eps_mults or {}:
        if not any(fnmatch.fnmatchcase(n, pattern) for n in picked):
            raise ValueError(f"eps multiplier pattern {pattern!r} matches no trained tensor")
    cfg = ZoConfig(
        distribution=distribution,
        scaling=scaling,
        estimator=estimator,
        rounding=rounding,
        master=master,
        pool_size=pool_size,
        pool_seed=pool_seed,
        tensors=tuple(entries),
    )
    try:
        resolve(cfg, graph)
    except ZocfError as exc:
        raise ValueError(str(exc)) from None
    return cfg


# --- accounting ------------------------------------------------------------------------------
def fresh_words_per_seed(config: ZoConfig, trainables: list[Trainable]) -> int:
    """PRNG words one perturbation (all trainable tensors) draws."""
    return sum(perturb.fresh_words(t.shape, config.dist_code, config.pool_size) for t in trainables)


def fresh_numbers_per_seed(config: ZoConfig, trainables: list[Trainable]) -> int:
    """Random numbers one perturbation draws (one per element fresh, one per row pooled)."""
    return sum(perturb.fresh_numbers(t.shape, config.pool_size) for t in trainables)


def fresh_words_per_step(config: ZoConfig, trainables: list[Trainable], q: int) -> int:
    """PRNG words the device draws in one step: PROBE and APPLY each regenerate the q
    directions; stochastic rounding adds a half-word per trained element in APPLY."""
    words = 2 * q * fresh_words_per_seed(config, trainables)
    if config.rounding == "stochastic":
        words += sum(update.rounding_words(t.size) for t in trainables)
    return words


def fresh_numbers_per_step(config: ZoConfig, trainables: list[Trainable], q: int) -> int:
    """Random numbers the device draws in one step, counted like fresh_words_per_step: the
    q perturbations' numbers twice (PROBE and APPLY), plus one rounding offset (a half-word)
    per trained element in APPLY with stochastic rounding."""
    numbers = 2 * q * fresh_numbers_per_seed(config, trainables)
    if config.rounding == "stochastic":
        numbers += sum(t.size for t in trainables)
    return numbers


def memory_bytes(config: ZoConfig, trainables: list[Trainable]) -> dict[str, int]:
    """Device RAM the ZO method needs beyond the model's constants (docs/zo-math.md)."""
    weights = sum(t.size for t in trainables if t.kind == "weight")
    int8 = config.master == "int8"
    return {
        "master": weights * update.MASTER_BYTES[config.master_code],
        # with a master, a probe perturbs in place and restores w = round(m); pure int8
        # needs a copy of the trained weights to restore exactly after saturation
        "probe_scratch": weights if int8 else 0,
        "pool": config.pool_size,
        "apply_scratch": 12 * MAX_Q,  # seed, coefficient and scale S per sample
    }
