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

from hilbench.npu import registry as _ops
from hilbench.npu.ops import depthwise_conv2d
from hilbench.zo import perturb, update

DEPTHWISE_KIND = depthwise_conv2d.KIND

VERSION = 1
SECTION_TAG = "ZOCF"
TWO_POINT, ONE_SIDED = 0, 1
ESTIMATORS = {"two-point": TWO_POINT, "one-sided": ONE_SIDED}
ESTIMATOR_NAMES = {v: k for k, v in ESTIMATORS.items()}
MAX_UNIT_SHIFT = 12
MAX_TRAINED = 128  # HB_MAX_TRAINED: trained tensors a device holds (MobileNetV2 "all": 106)
BIAS_UNIT_SHIFT = 8  # a bias LSB is s_in * s_w: one eps of a bias moves it 2^8 bias LSBs
ONE = 1 << perturb.MULT_FRAC  # eps multiplier 1.0 in Q4
MIN_MULT, MAX_MULT = 1, 255  # Q4 eps multipliers (tensor and channel)

# The ZO work area's parts besides the masters and the pool (docs/firmware.md "ZO state";
# device_fw/core/model.c places them, gen/hb_zo.h carries these numbers):
TENSOR_BYTES = 32  # one trained tensor's description: the C's hb_zo_tensor, 24 B on a 32-bit
#                    MCU, 32 B on a 64-bit host (model.c asserts it fits)
SCALE_BYTES = 4  # a PROBE's scale S (u32) of each trained tensor, for the seed being probed
DELTA_BYTES = 4  # the delta table of a perturbed pass: an int32 per distinct raw sample
DISTRIBUTION_VALUES = {perturb.RADEMACHER: 2, perturb.GAUSSIAN: 17, perturb.UNIFORM: 128}
ROW_CACHE_LINES = 32  # the depthwise row stream's block cache: lines of
ROW_CACHE_LINE_BYTES = 4 + 4 * 4  # a tag and a 4-word Philox block

# Byte layout, declared once (the C header's offsets and sizes come from these).
HEADER_FIELDS = (
    ("version", "B"),
    ("distribution", "B"),
    ("scaling", "B"),
    ("estimator", "B"),
    ("rounding", "B"),
    ("master", "B"),
    ("n_entries", "H"),
    ("pool_size", "I"),
    ("pool_seed", "I"),
    ("reserved", "I"),
)
ENTRY_FIELDS = (
    ("tensor", "H"),
    ("eps_mult", "B"),
    ("unit_shift", "B"),
    ("n", "H"),
    ("reserved", "H"),
)
_HEADER = struct.Struct("<" + "".join(f for _, f in HEADER_FIELDS))
_ENTRY = struct.Struct("<" + "".join(f for _, f in ENTRY_FIELDS))
HEADER_SIZE = _HEADER.size  # 20
ENTRY_SIZE = _ENTRY.size  # 8
CHANNEL_ALIGN = 4  # channel multipliers are zero-padded to a multiple of 4


def field_offsets(fields: tuple[tuple[str, str], ...]) -> list[tuple[str, int, int]]:
    """(name, offset, size) of each field of a packed little-endian record."""
    out, pos = [], 0
    for name, fmt in fields:
        size = struct.calcsize("<" + fmt)
        out.append((name, pos, size))
        pos += size
    return out


#: Every refusal of a ZOCF section a device sends (BAD_MODEL), in the order it checks them
#: (docs/zo-math.md, "The ZOCF check"): the section's bytes first, then each entry against
#: the model. Python %-templates (%d only); the C firmware formats the same texts
#: (gen/hb_zo.h, HB_MSG_ZOCF_*). Tensors are named by index, never by name.
MESSAGES = {
    "short": "ZOCF section is %d bytes, the header needs %d",
    "version": "ZOCF version %d, this device reads %d",
    "reserved": "ZOCF reserved header word is %d, must be 0",
    "distribution": "ZOCF distribution code %d unknown: 0 rademacher, 1 gaussian, 2 uniform",
    "scaling": "ZOCF scaling code %d unknown: 0 fixed, 1 adaptive",
    "estimator": "ZOCF estimator code %d unknown: 0 two-point, 1 one-sided",
    "rounding": "ZOCF rounding code %d unknown: 0 nearest, 1 stochastic",
    "master": "ZOCF master code %d unknown: 0 q16, 1 int16, 2 int8",
    "pool_size": "ZOCF pool_size %d outside 0..%d",
    "n_entries": "ZOCF has %d entries, this device trains at most %d tensors",
    "entry_truncated": "ZOCF truncated in entry %d",
    "channels_truncated": "ZOCF truncated in entry %d's channel multipliers",
    "entry_reserved": "ZOCF entry %d: reserved or padding bytes are not 0",
    "trailing": "ZOCF has %d unexpected trailing bytes",
    "no_weights": "ZOCF trains every weight tensor, but the model has none",
    "too_many": "the model has %d weight tensors, this device trains at most %d",
    "index": "ZOCF entry %d: tensor index %d >= %d tensors",
    "twice": "ZOCF entry %d: tensor %d listed twice",
    "not_trainable": "ZOCF entry %d: tensor %d is not the weight or bias of an op",
    "weight_dtype": "ZOCF entry %d: weight tensor %d is not int8",
    "bias_dtype": "ZOCF entry %d: bias tensor %d is not int32",
    "eps_mult": "ZOCF entry %d: eps_mult %d outside 1..255",
    "unit_shift": "ZOCF entry %d: unit_shift %d outside 0..%d",
    "weight_shift": "ZOCF entry %d: tensor %d holds int8 weights, its unit_shift must be 0, not %d",
    "channels": "ZOCF entry %d: %d channel multipliers for tensor %d with %d rows",
    "channel_zero": "ZOCF entry %d: channel multiplier %d is 0",
    "pool_row": (
        "ZOCF pool of %d is shorter than a row of tensor %d (%d elements), "
        "so the row would repeat at a fixed distance"
    ),
}


class ZocfError(ValueError):
    """A ZOCF section that is malformed or does not fit the model; the text of a device
    refusal is ``MESSAGES[key] % args`` (``key`` None: a host-side error)."""

    def __init__(self, key: str | None, *args: int | str, tensor: int | None = None) -> None:
        self.key = key
        self.message = MESSAGES[key] % args if key is not None else str(args[0])
        self.tensor = tensor  # the blob tensor index an entry's refusal is about, if any
        super().__init__(self.message)


@dataclass(frozen=True)
class TensorZo:
    """One trainable tensor: its index in the blob's tensor table and its eps scaling."""

    index: int
    eps_mult: int = ONE  # Q4, 1..255
    unit_shift: int = 0  # stored LSBs per perturbation unit = 2^unit_shift
    channel_mult: tuple[int, ...] = ()  # Q4 per row (docs/zo-math.md "Rows"); empty = eps_mult


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
                raise ZocfError(None, f"{name} {value!r} unknown; use one of {sorted(table)}")
        if not 0 <= self.pool_size <= perturb.MAX_POOL:
            raise ZocfError("pool_size", self.pool_size, perturb.MAX_POOL)
        if not 0 <= self.pool_seed < 2**32:
            raise ZocfError(None, f"pool seed {self.pool_seed} is not a u32")

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
            out += cm + b"\0" * (-len(cm) % CHANNEL_ALIGN)
        return bytes(out)

    @classmethod
    def from_bytes(cls, data: bytes) -> ZoConfig:
        """Parse a ZOCF section with a device's checks, in its order (ZocfError): the header
        (size, version, reserved word, the five codes, pool_size, n_entries), then each entry
        (truncation, reserved and padding bytes), then trailing bytes."""
        data = bytes(data)
        if len(data) < HEADER_SIZE:
            raise ZocfError("short", len(data), HEADER_SIZE)
        ver, dist, scal, est, rnd, mst, n, psize, pseed, res = _HEADER.unpack_from(data, 0)
        if ver != VERSION:
            raise ZocfError("version", ver, VERSION)
        if res != 0:
            raise ZocfError("reserved", res)
        names = []
        for what, code, table in (
            ("distribution", dist, perturb.DISTRIBUTION_NAMES),
            ("scaling", scal, {v: k for k, v in perturb.SCALINGS.items()}),
            ("estimator", est, ESTIMATOR_NAMES),
            ("rounding", rnd, {v: k for k, v in update.ROUNDINGS.items()}),
            ("master", mst, update.MASTER_NAMES),
        ):
            if code not in table:
                raise ZocfError(what, code)
            names.append(table[code])
        if psize > perturb.MAX_POOL:
            raise ZocfError("pool_size", psize, perturb.MAX_POOL)
        if n > MAX_TRAINED:
            raise ZocfError("n_entries", n, MAX_TRAINED)
        pos = HEADER_SIZE
        tensors = []
        for i in range(n):
            if pos + ENTRY_SIZE > len(data):
                raise ZocfError("entry_truncated", i)
            index, mult, shift, nch, res2 = _ENTRY.unpack_from(data, pos)
            pos += ENTRY_SIZE
            padded = nch + (-nch % CHANNEL_ALIGN)
            if pos + padded > len(data):
                raise ZocfError("channels_truncated", i)
            cm = tuple(data[pos : pos + nch])
            if res2 != 0 or any(data[pos + nch : pos + padded]):
                raise ZocfError("entry_reserved", i)
            pos += padded
            tensors.append(TensorZo(index, mult, shift, cm))
        if pos != len(data):
            raise ZocfError("trailing", len(data) - pos)
        return cls(*names, pool_size=psize, pool_seed=pseed, tensors=tuple(tensors))

    @classmethod
    def from_sections(cls, sections: dict[str, bytes]) -> ZoConfig:
        """The ZOCF section of a model blob's sections; the defaults without one."""
        data = sections.get(SECTION_TAG)
        return cls() if data is None else cls.from_bytes(data)


# --- resolving against a model -----------------------------------------------------------------
@dataclass(frozen=True)
class Trainable:
    """A trainable tensor as the device sees it, in PRNG tensor order."""

    name: str
    kind: str  # "weight" (int8) or "bias" (int32)
    shape: tuple[int, ...]
    eps_mult: int | np.ndarray  # Q4: a scalar, or per row, broadcastable to shape
    unit_shift: int
    layout: int = perturb.ROWS_LEADING  # rows: axis 0, or the last axis (depthwise filters)
    index: int = -1  # in the blob's tensor table

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def rows(self) -> tuple[int, int]:
        """(rows R, row length L), docs/zo-math.md "Rows"."""
        return perturb.rows_of(self.shape, self.layout)


def tensor_roles(graph) -> dict[str, tuple[str, str]]:
    """``name -> (kind, op kind)`` of every filter ("weight") and bias tensor; a tensor
    several ops use takes the role of the first of them in op order."""
    roles: dict[str, tuple[str, str]] = {}
    for op in graph.ops:
        d = _ops.get(op.kind)
        for kind, pos in (("weight", d.weight_input), ("bias", d.bias_input)):
            if pos is not None and pos < len(op.inputs):
                roles.setdefault(op.inputs[pos], (kind, op.kind))
    return roles


def _tensor_kinds(graph) -> dict[str, str]:
    return {n: kind for n, (kind, _) in tensor_roles(graph).items()}


def row_layout(kind: str, op_kind: str) -> int:
    """Rows of a trained tensor (decision: rows are output channels): a depthwise filter's
    are its last axis, every other filter's and every bias's are axis 0."""
    if kind == "weight" and op_kind == DEPTHWISE_KIND:
        return perturb.ROWS_TRAILING
    return perturb.ROWS_LEADING


def default_entries(graph) -> tuple[TensorZo, ...]:
    """What a ZOCF without entries trains: every filter tensor, in op order (first use)."""
    names = list(graph.tensors)
    return tuple(
        TensorZo(names.index(n)) for n, (k, _) in tensor_roles(graph).items() if k == "weight"
    )


def resolve(config: ZoConfig, graph) -> list[Trainable]:
    """The trainable tensors ``config`` names in ``graph``, with a device's checks in its
    order (ZocfError): the entry count, then each entry's tensor index, uniqueness, role,
    dtype, eps_mult, unit_shift, channel multipliers and the pool length."""
    names = list(graph.tensors)
    roles = tensor_roles(graph)
    entries = config.tensors
    if len(entries) > MAX_TRAINED:  # a host-built config (a parsed one was refused already)
        raise ZocfError("n_entries", len(entries), MAX_TRAINED)
    if not entries:
        entries = default_entries(graph)
        if not entries:  # a model without weights (pooling only): inference, nothing trains
            return []
        if len(entries) > MAX_TRAINED:
            raise ZocfError("too_many", len(entries), MAX_TRAINED)
    seen: set[int] = set()
    out = []
    for i, e in enumerate(entries):
        if e.index >= len(names):
            raise ZocfError("index", i, e.index, len(names))
        if e.index in seen:
            raise ZocfError("twice", i, e.index, tensor=e.index)
        seen.add(e.index)
        name = names[e.index]
        kind, op_kind = roles.get(name, (None, ""))
        t = graph.tensors[name]
        if kind is None or t.data is None:
            raise ZocfError("not_trainable", i, e.index, tensor=e.index)
        if kind == "weight" and t.dtype != "int8":
            raise ZocfError("weight_dtype", i, e.index, tensor=e.index)
        if kind == "bias" and t.dtype != "int32":
            raise ZocfError("bias_dtype", i, e.index, tensor=e.index)
        if not MIN_MULT <= e.eps_mult <= MAX_MULT:
            raise ZocfError("eps_mult", i, e.eps_mult, tensor=e.index)
        if not 0 <= e.unit_shift <= MAX_UNIT_SHIFT:
            raise ZocfError("unit_shift", i, e.unit_shift, MAX_UNIT_SHIFT, tensor=e.index)
        if kind == "weight" and e.unit_shift != 0:
            raise ZocfError("weight_shift", i, e.index, e.unit_shift, tensor=e.index)
        layout = row_layout(kind, op_kind)
        shape = tuple(t.shape)
        rows, length = perturb.rows_of(shape, layout)
        mult: int | np.ndarray = e.eps_mult
        if e.channel_mult:
            if len(e.channel_mult) != rows:
                raise ZocfError("channels", i, len(e.channel_mult), e.index, rows, tensor=e.index)
            zero = [j for j, c in enumerate(e.channel_mult) if c < MIN_MULT]
            if zero:
                raise ZocfError("channel_zero", i, zero[0], tensor=e.index)
            mult = perturb.row_mults(np.asarray(e.channel_mult), shape, layout)
        if config.pool_size and length > config.pool_size:
            raise ZocfError("pool_row", config.pool_size, e.index, length, tensor=e.index)
        out.append(Trainable(name, kind, shape, mult, e.unit_shift, layout, e.index))
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
    except ZocfError as exc:  # the device's text, and for the host user the tensor's name
        where = f" (tensor {exc.tensor} is {names[exc.tensor]})" if exc.tensor is not None else ""
        raise ValueError(str(exc) + where) from None
    return cfg


# --- accounting ------------------------------------------------------------------------------
def fresh_words_per_seed(config: ZoConfig, trainables: list[Trainable]) -> int:
    """PRNG words one perturbation (all trainable tensors) draws."""
    return sum(
        perturb.fresh_words(t.shape, config.dist_code, config.pool_size, t.layout)
        for t in trainables
    )


def fresh_numbers_per_seed(config: ZoConfig, trainables: list[Trainable]) -> int:
    """Random numbers one perturbation draws (one per element fresh, one per row pooled)."""
    return sum(perturb.fresh_numbers(t.shape, config.pool_size, t.layout) for t in trainables)


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


def pad16(n: int) -> int:
    """``n`` rounded up to a multiple of 16 (arena regions, docs/firmware.md "Memory")."""
    return (n + 15) & ~15


def memory_bytes(config: ZoConfig, trainables: list[Trainable]) -> dict[str, int]:
    """The ZO work area by part, unpadded, in the order device_fw/core/model.c places them
    (docs/zo-math.md "Device memory", docs/firmware.md "ZO state"). A part is 0 when the
    model or method needs none of it:

    - ``master``: per trained int8 weight ``4`` bytes (q16), ``2`` (int16), ``0`` (int8: the
      weights are their own master); biases are their own master, in the blob;
    - ``pool``: ``pool_size``;
    - ``row_buffer``: the longest trained weight row, which a PROBE produces perturbed weights
      into (docs/zo-math.md "Rows"), and ``delta_table``: 4 bytes per value of the
      distribution (2, 17 or 128), both only if a weight tensor is trained;
    - ``row_cache``: the depthwise row stream's blocks, if a depthwise filter is trained with
      fresh samples;
    - ``tensors`` and ``scales``: per trained tensor its description and a PROBE's scale.

    The arena's books (:func:`zo_work_bytes`) pad each master and each other part to 16."""
    weights = [t for t in trainables if t.kind == "weight"]
    depthwise = any(t.layout == perturb.ROWS_TRAILING for t in weights)
    return {
        "master": sum(t.size for t in weights) * update.MASTER_BYTES[config.master_code],
        "pool": config.pool_size,
        "row_buffer": row_buffer_bytes(trainables),
        "delta_table": DELTA_BYTES * DISTRIBUTION_VALUES[config.dist_code] if weights else 0,
        "row_cache": ROW_CACHE_LINES * ROW_CACHE_LINE_BYTES
        if depthwise and config.pool_size == 0
        else 0,
        "tensors": TENSOR_BYTES * len(trainables),
        "scales": SCALE_BYTES * len(trainables),
    }


def zo_work_bytes(config: ZoConfig, trainables: list[Trainable]) -> int:
    """Arena bytes of the ZO state (``zo_bytes``, docs/firmware.md "ZO state"; equal to the
    C's ``hb_model_work_bytes`` by the golden vectors): the parts of :func:`memory_bytes` in
    their order, each trained weight tensor's master and every other part padded to 16."""
    per = update.MASTER_BYTES[config.master_code]
    masters = sum(pad16(t.size * per) for t in trainables if t.kind == "weight")
    parts = memory_bytes(config, trainables)
    return masters + sum(pad16(v) for k, v in parts.items() if k != "master")


def row_buffer_bytes(trainables: list[Trainable]) -> int:
    """The longest trained weight row, ``L`` of docs/zo-math.md "Rows" (unpadded): the one
    row of perturbed int8 weights a PROBE's forward pass holds at a time."""
    return max((t.rows[1] for t in trainables if t.kind == "weight"), default=0)
