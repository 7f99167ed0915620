"""The activation plan of a device (docs/model-blob.md, "The activation plan"): where each
activation lives in the arena's activation region, and the region's size ``act_bytes``.

The mirror of device_fw/core/plan.c; the twin's arena books use :func:`act_bytes`. The rule:

- every activation the graph uses -- the graph input and each op's output -- is one int8
  buffer of its element count (constants stay in the blob; a tensor no op writes and that is
  not the graph input gets no buffer);
- its life runs from the step it is written (the graph input: step 0; op ``j``'s output:
  step ``j``) through the last op that reads it (the graph output: through step ``n_ops``);
  two lives overlap when each starts no later than the other ends;
- buffers are placed in the order they are born (the graph input first, then the outputs in
  op order), each at the lowest offset, a multiple of 16, at which it overlaps no already
  placed buffer whose life overlaps its own;
- ``act_bytes`` is the end of the highest buffer rounded up to a multiple of 16.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hilbench.npu.graph import Graph
from hilbench.zo.perturb import DISTRIBUTIONS, ELEMENTS_PER_WORD

ALIGN = 16  # every buffer starts at a multiple of 16 bytes of the activation region


def pad16(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass(frozen=True)
class Buffer:
    """One activation's place: bytes ``[offset, offset + size)`` during steps ``first..last``."""

    tensor: str
    size: int
    first: int
    last: int
    offset: int

    @property
    def end(self) -> int:
        return self.offset + self.size


def lives(graph: Graph) -> list[tuple[str, int, int, int]]:
    """``(tensor, size, first, last)`` of every activation, in birth order."""
    born: list[tuple[str, int]] = [(graph.input, 0)]
    for j, op in enumerate(graph.ops):
        born += [(n, j) for n in op.outputs]
    last = {n: first for n, first in born}
    for j, op in enumerate(graph.ops):
        for n in op.inputs:
            if n in last:
                last[n] = max(last[n], j)
    last[graph.output] = len(graph.ops)
    return [(n, math.prod(graph.tensors[n].shape), first, last[n]) for n, first in born]


def placement(graph: Graph) -> list[Buffer]:
    """Every activation's buffer, in birth order (the placement plan.c computes)."""
    placed: list[Buffer] = []  # kept sorted by offset
    out: list[Buffer] = []
    for name, size, first, last in lives(graph):
        offset = 0
        for b in placed:
            if b.first > last or first > b.last:
                continue  # lives apart: the bytes may be shared
            if offset + size <= b.offset:
                break  # fits below this one, and every later one starts higher
            offset = max(offset, pad16(b.end))
        buf = Buffer(name, size, first, last, offset)
        out.append(buf)
        k = 0
        while k < len(placed) and placed[k].offset <= offset:
            k += 1
        placed.insert(k, buf)
    return out


def act_bytes(graph: Graph) -> int:
    """Bytes of the activation region ``graph`` needs on a device (a multiple of 16)."""
    return pad16(max((b.end for b in placement(graph)), default=0))


@dataclass(frozen=True)
class ProbeScratch:
    """What a PROBE may keep in the arena's free bytes (device_fw/core/model.c
    hb_model_probe_plan, the same figures): the frozen prefix's batch of activations at the
    cut (``prefix_bytes`` = B pad16(cut elements), first) and one perturbed copy of the
    trained tensors per pass (``copy_bytes``: a table of 4-byte offsets, then the int8
    weights and int32 biases, each part padded to 16),
    each used only where it fits what is free; ``cut`` is the boundary op (0: no prefix)."""

    cut: int
    tensor: str | None
    prefix_bytes: int
    copy_bytes: int
    #: a third part, only with the copy: the stream words of each trained tensor for
    #: the seed being probed (64 bytes per 16 words; with a pool, of the rows' offsets), drawn
    #: once per seed for its scale and both passes (model.c hb_model_probe_words)
    words_bytes: int = 0

    def plan(self, free: int) -> tuple[bool, bool]:
        """(use the prefix, use the copy) with ``free`` bytes of scratch."""
        prefix = self.cut > 0 and self.prefix_bytes <= free
        left = free - (self.prefix_bytes if prefix else 0)
        copy = self.copy_bytes > 0 and self.copy_bytes <= left
        return prefix, copy

    def words(self, free: int) -> bool:
        """Whether the PROBE also buffers its seeds' stream words in ``free`` bytes."""
        prefix, copy = self.plan(free)
        used = (self.prefix_bytes if prefix else 0) + self.copy_bytes
        return copy and self.words_bytes > 0 and used + self.words_bytes <= free


def words_bytes(trained, distribution: str, pool_size: int) -> int:
    """The PROBE's buffered stream words (hb_model_words_bytes): 64 bytes per 16 words of
    each trained tensor's fresh samples, or with a pool of its rows' offsets (a 16-bit half
    per row: 32 rows per 64 bytes)."""
    if pool_size:
        return sum(64 * -(-t.rows[0] // 32) for t in trained)
    per16 = 16 * ELEMENTS_PER_WORD[DISTRIBUTIONS[distribution]]
    return sum(64 * -(-t.size // per16) for t in trained)


def probe_scratch(
    graph: Graph, trained, batch: int, distribution: str | None = None, pool_size: int = 0
) -> ProbeScratch:
    """The PROBE's scratch figures for a mini-batch of ``batch`` (``trained``: the ZOCF's
    trained tensors, hilbench.zo.zocf.Trainable, in its order; ``distribution`` and
    ``pool_size``: the ZOCF's, for the buffered words, none if not given)."""
    words = 0 if distribution is None else words_bytes(trained, distribution, pool_size)
    names = frozenset(t.name for t in trained)
    cut = graph.cut(graph.first_reader(names)) if names else None
    # the copy: its table of offsets (4 bytes per tensor), then every trained tensor
    copy = pad16(4 * len(trained)) + sum(
        pad16(t.size * (4 if t.kind == "bias" else 1)) for t in trained
    )
    if cut is None:
        return ProbeScratch(0, None, 0, copy, words)
    c, tensor = cut
    n = math.prod(graph.tensors[tensor].shape)
    return ProbeScratch(c, tensor, batch * pad16(n), copy, words)


CACHE_RESERVE_ITEMS = 32  # HB_MODEL_CACHE_RESERVE_ITEMS (core/hb_model.h): a batch's prefix


@dataclass(frozen=True)
class CachePart:
    """One data slot's part of the firmware's prefix cache (core/model.c cache_of): entries
    of ``entry`` bytes (pad16 of the cut's elements) for items ``[0, cap)`` of its
    ``n_items``, after a bitmap of the entries made; ``bytes`` in all (0: none)."""

    slot: int
    n_items: int
    cap: int
    entry: int
    bytes: int


def cache_part(entry: int, copy_bytes: int, left: int, n_items: int) -> tuple[int, int]:
    """(cap, bytes) of a slot's part made with ``left`` free bytes not yet taken by the
    cache: as many entries as leave the PROBE its copy and CACHE_RESERVE_ITEMS prefix
    entries, at most ``n_items``."""
    room = left - copy_bytes - CACHE_RESERVE_ITEMS * entry
    if room <= 0:
        return 0, 0
    cap = min(room // entry, n_items)
    while cap and pad16((cap + 7) // 8) + cap * entry > room:
        cap -= 1
    return cap, (pad16((cap + 7) // 8) + cap * entry) if cap else 0


def prefix_cache(graph: Graph, trained, free: int, slots) -> list[CachePart]:
    """The parts of the firmware's prefix cache in ``free`` bytes of free arena for the data
    slots ``slots`` ((slot, n_items), in the order commands first read them); [] without a
    frozen prefix (docs/firmware.md "The prefix cache")."""
    sc = probe_scratch(graph, trained, 1)
    if not sc.cut:
        return []
    parts, taken = [], 0
    for slot, n in slots:
        cap, size = cache_part(sc.prefix_bytes, sc.copy_bytes, free - taken, n)
        parts.append(CachePart(slot, n, cap, sc.prefix_bytes, size))
        taken += size
    return parts
