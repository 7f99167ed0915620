"""The firmware's prefix-cache books, kept by the twin (device_fw/core/model.c ``cache_of``,
``hb_model_set_free``; docs/firmware.md "The prefix cache").

The twin's :meth:`ModelState.at_cut` keeps every item's activations at the cut: its numbers are
the firmware's either way. What it does not know is *which* items the firmware has an entry
for, and so what each EVAL and PROBE computes on the device: these books say it, for the
PROBE's scratch plan (what the cache leaves of the free arena), its counters and the modeled
durations. The rule, as the C's:

- the books hold while the store's books stand (the arena's generation and free bytes); any
  upload, discard or model load forgets every part;
- a slot's part is made the first time a command needs it, with what the other parts left:
  entries for items ``[0, cap)`` (:func:`plan.cache_part`, leaving the PROBE its copy and a
  batch's prefix); an entry is made the first time an item is read and kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hilbench.device import plan


@dataclass
class SlotPart:
    """One slot's part: entries for items ``[0, cap)``, ``made`` (one flag per item below cap)."""

    n_items: int
    cap: int
    bytes: int
    made: np.ndarray


@dataclass(frozen=True)
class ItemsRead:
    """What one command's items cost on the device: ``fresh`` items whose prefix runs now
    (entries made, each once, and items without an entry: every time they appear),
    ``uncached`` of those the items without an entry (their prefix goes to the PROBE's
    scratch, if it fits)."""

    fresh: int
    uncached: int


@dataclass
class PrefixBooks:
    """The prefix cache's parts per slot, for one state of the store's books."""

    key: tuple[int, int] = (-1, -1)
    parts: dict[int, SlotPart] = field(default_factory=dict)
    cache_bytes: int = 0

    def hold(self, generation: int, free: int) -> None:
        """The books of a command run with the store at ``generation`` and ``free`` bytes:
        forget every part if either changed (``hb_model_set_free``)."""
        if (generation, free) != self.key:
            self.key, self.parts, self.cache_bytes = (generation, free), {}, 0

    def forget(self) -> None:
        """Every part gone, the books kept (a HEAD_GRAD whose accumulators reach the cache)."""
        self.parts, self.cache_bytes = {}, 0

    def scratch(self) -> int:
        """The free bytes the cache leaves to the PROBE's scratch."""
        return self.key[1] - self.cache_bytes

    def part(self, slot: int, n_items: int, entry: int, copy_bytes: int) -> SlotPart:
        """The slot's part, made now if it has none."""
        p = self.parts.get(slot)
        if p is None or p.n_items != n_items:
            cap, size = plan.cache_part(entry, copy_bytes, self.scratch(), n_items)
            p = SlotPart(n_items, cap, size, np.zeros(cap, bool))
            self.parts[slot] = p
            self.cache_bytes += size
        return p

    def read(self, slot: int, n_items: int, entry: int, copy_bytes: int, idx) -> ItemsRead:
        """Items ``idx`` read at the cut: entries made for those below the cap not made yet."""
        p = self.part(slot, n_items, entry, copy_bytes)
        idx = np.asarray(idx, dtype=np.int64)
        below = idx < p.cap
        new = np.unique(idx[below][~p.made[idx[below]]])
        p.made[new] = True
        uncached = int(np.count_nonzero(~below))
        return ItemsRead(fresh=len(new) + uncached, uncached=uncached)
