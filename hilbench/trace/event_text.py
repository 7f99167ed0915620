"""Event texts kept out of HDF5's global heap: a byte log beside the events table.

Up to format version 2 an event's ``detail`` was a variable-length string, stored in HDF5's
global heap. A write cut short (a full disk) while a flush added heap objects can leave the
heap collection on disk torn: then HDF5 cannot read any row of the events table, not even the
ones of earlier, whole flushes ("bad heap index"). Since version 3 a run keeps its event
texts as UTF-8 bytes appended to the ``event_text`` dataset (uint8), and each events row says
where its text lies (``text_start``, ``text_bytes``); both are plain chunked datasets, which a
cut-short write can only leave short. The writer puts the texts on disk before the rows that
point at them, so a row whose text lies past the end of ``event_text`` was never whole.

In memory (the reader, the row buffer) events keep one layout, schema.EVENTS_DTYPE, with the
text as ``detail``, whatever the run's version.
"""

from __future__ import annotations

import h5py
import numpy as np

from hilbench.trace import schema as S
from hilbench.trace.decoding import decode_rows


def has_byte_log(events: h5py.Dataset) -> bool:
    """Whether this events table keeps its texts in ``event_text`` (format version >= 3)."""
    return "text_start" in (events.dtype.names or ())


def to_disk(block: np.ndarray, text_at: int) -> tuple[np.ndarray, np.ndarray]:
    """An events block of the in-memory layout as (text bytes, rows of the byte-log layout),
    the texts placed from byte ``text_at`` of ``event_text`` on."""
    texts = [str(d).encode("utf-8", "replace") for d in block["detail"]]
    sizes = np.array([len(t) for t in texts], dtype=np.int64)
    rows = np.empty(len(block), S.EVENT_ROWS_DTYPE)
    for col in ("step", "time", "kind"):
        rows[col] = block[col]
    rows["text_start"] = text_at + np.cumsum(sizes) - sizes
    rows["text_bytes"] = sizes
    return np.frombuffer(b"".join(texts), dtype=np.uint8), rows


def from_disk(rows: np.ndarray, text: np.ndarray, text_at: int = 0) -> np.ndarray:
    """Byte-log rows (``text`` holding the bytes of ``event_text`` from ``text_at`` on) in
    the in-memory layout, decoded; cut before the first row whose text is not all there."""
    ends = rows["text_start"].astype(np.int64) + rows["text_bytes"]
    whole = (rows["text_start"] >= text_at) & (rows["text_bytes"] >= 0)
    whole &= ends <= text_at + len(text)
    n = len(rows) if whole.all() else int(np.argmin(whole))
    out = np.empty(n, S.EVENTS_DTYPE)
    for col in ("step", "time", "kind"):
        out[col] = rows[col][:n]
    data = text.tobytes()
    starts, sizes = rows["text_start"][:n].tolist(), rows["text_bytes"][:n].tolist()
    out["detail"] = [
        data[s - text_at : s - text_at + b].decode("utf-8", "replace")
        for s, b in zip(starts, sizes, strict=True)
    ]
    return decode_rows(out)


def read_rows(g: h5py.Group, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Rows ``start:stop`` of a byte-log events table, in the in-memory layout."""
    rows = g["events"][start:stop]
    if not len(rows):
        return decode_rows(np.empty(0, S.EVENTS_DTYPE))
    first = int(rows["text_start"][0])
    end = int((rows["text_start"].astype(np.int64) + rows["text_bytes"]).max())
    log = g[S.EVENT_TEXT]
    text = log[max(0, first) : min(end, log.shape[0])] if end > first else np.empty(0, np.uint8)
    return from_disk(rows, np.asarray(text, dtype=np.uint8), max(0, first))


def text_end(rows: np.ndarray) -> int:
    """The end of the last text these byte-log rows point at (0 for none)."""
    if not len(rows):
        return 0
    return int((rows["text_start"].astype(np.int64) + rows["text_bytes"]).max())
