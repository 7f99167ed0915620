"""The device's arena books (docs/firmware.md, "Memory: one arena").

One block of ``arena_bytes`` holds the model and the data slots, nothing else. The **model
region** grows from the bottom: ``pad16(total_len)`` while a model uploads, ``pad16(total_len)
+ act_bytes + zo_bytes`` once it is loaded. **Data slots** are stacked from the top, each
``pad16(total_len)`` from the start of its upload; discarding a slot moves the slots below it
up. ``free = arena_bytes - model region - sum(slots)``. The twin keeps exactly these books so
that it accepts and refuses the same uploads as the C firmware (device_fw/core/store.c), with
the same MODEL_TOO_LARGE messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hilbench.protocol import spec

ALIGN = 16
DEFAULT_ARENA_BYTES = spec.DEFAULT_ARENA_BYTES  # the twin's and the SIL's arena (declared once)


def pad16(n: int) -> int:
    """``n`` rounded up to a multiple of 16."""
    return (n + ALIGN - 1) // ALIGN * ALIGN


class ArenaFull(Exception):
    """An upload or a model does not fit; ``needed`` and ``free`` in bytes, ``kind`` says
    which check: ``"blob"`` (an upload at offset 0) or ``"work"`` (a model's working memory
    at completion, with ``act`` and ``zo`` its parts)."""

    def __init__(self, kind: str, needed: int, free: int, *, act: int = 0, zo: int = 0) -> None:
        super().__init__(f"{kind}: {needed} bytes needed, {free} free")
        self.kind = kind
        self.needed = needed
        self.free = free
        self.act = act
        self.zo = zo


@dataclass
class Arena:
    """Bytes held by the model region and by each slot, and where each slot sits."""

    arena_bytes: int
    model_blob: int = 0  # pad16(total_len) of the model being uploaded or loaded, 0 if none
    model_work: int = 0  # act_bytes + zo_bytes of the loaded model, 0 while uploading
    slots: list[tuple[int, int]] = field(default_factory=list)  # (slot, bytes), top first
    #: changes whenever the books do (store.c hb_store_generation): an upload begun, a model
    #: or slot complete, a discard; what the prefix cache is kept for
    generation: int = 0

    def __post_init__(self) -> None:
        if self.arena_bytes < 0:
            raise ValueError(f"arena_bytes = {self.arena_bytes} must be >= 0")

    @property
    def model_region(self) -> int:
        return self.model_blob + self.model_work

    def slot_bytes(self, slot: int) -> int:
        return next((n for s, n in self.slots if s == slot), 0)

    def free(self) -> int:
        return self.arena_bytes - self.model_region - sum(n for _, n in self.slots)

    def slot_offset(self, slot: int) -> int | None:
        """Where a slot's bytes start (the C's layout: stacked down from the top)."""
        top = self.arena_bytes
        for s, n in self.slots:
            top -= n
            if s == slot:
                return top
        return None

    # --- the model region -------------------------------------------------------------
    def discard_model(self) -> None:
        self.generation += 1
        self.model_blob = self.model_work = 0

    def start_model(self, total_len: int) -> None:
        """An upload at offset 0: the old model (or upload) goes, then the blob must fit."""
        self.discard_model()
        need = pad16(total_len)
        if need > self.free():
            raise ArenaFull("blob", need, self.free())
        self.model_blob = need

    def finish_model(self, act_bytes: int, zo_bytes: int) -> None:
        """A parsed model's working memory must fit what its blob left; else nothing is kept."""
        if act_bytes % ALIGN or zo_bytes % ALIGN or act_bytes < 0 or zo_bytes < 0:
            raise ValueError(f"act_bytes {act_bytes} and zo_bytes {zo_bytes} must be pad16")
        need = act_bytes + zo_bytes
        self.generation += 1
        free = self.free()
        if need > free:
            self.discard_model()
            raise ArenaFull("work", need, free, act=act_bytes, zo=zo_bytes)
        self.model_work = need

    # --- data slots ---------------------------------------------------------------------
    def slot_complete(self) -> None:
        """A slot's bytes are all in (its region was booked when its upload began)."""
        self.generation += 1

    def discard_slot(self, slot: int) -> None:
        self.generation += 1
        self.slots = [(s, n) for s, n in self.slots if s != slot]

    def start_slot(self, slot: int, total_len: int) -> None:
        """An upload at offset 0: the slot's old data (or upload) goes, then the blob must
        fit; it is stacked below the other slots."""
        self.discard_slot(slot)
        need = pad16(total_len)
        if need > self.free():
            raise ArenaFull("blob", need, self.free())
        self.slots.append((slot, need))
