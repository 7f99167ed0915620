"""data/cache.py: a truncated entry is made again, an unwritable cache is said once."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from hilbench.data import cache


def _make(calls: list[int]):
    def make() -> dict[str, np.ndarray]:
        calls.append(1)
        return {"w": np.arange(1000, dtype=np.int32)}

    return make


def test_a_truncated_entry_is_made_again_and_replaced(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HILBENCH_CACHE", str(tmp_path))
    calls: list[int] = []
    first = cache.cached("pretrained", "k", _make(calls))
    entry = cache.path_for("pretrained", "k")
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])  # a cut-short copy
    again = cache.cached("pretrained", "k", _make(calls))
    assert len(calls) == 2 and np.array_equal(first["w"], again["w"])
    assert cache.cached("pretrained", "k", _make(calls))["w"].sum() == first["w"].sum()
    assert len(calls) == 2  # the rebuilt entry is read back


def test_a_cache_that_is_a_file_is_said_once(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("HILBENCH_CACHE", str(blocker))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for key in ("a", "b", "c"):
            assert cache.cached("pretrained", key, _make([]))["w"][-1] == 999
    said = [w for w in caught if issubclass(w.category, cache.CacheWarning)]
    assert len(said) == 1 and "HILBENCH_CACHE" in str(said[0].message)
