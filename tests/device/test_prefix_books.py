"""The twin's books of the firmware's prefix cache (hilbench/device/prefix_books.py, the rule
of core/model.c cache_of): which items the device holds at the cut, and so what its EVALs and
PROBEs compute -- the PROBE's scratch plan, the counters and the modeled durations. An item
read before starts at the cut; an item past the slot's cap, or any item once the store's books
change, runs the prefix again."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.backend.emulate import EmulatorBackend
from hilbench.device import DeviceTwin, plan
from hilbench.device.prefix_books import PrefixBooks
from hilbench.npu import cost, zoo
from hilbench.protocol import messages as m
from tests.sil.test_prefix_cache import N, cnn_blob, data

Q = 2  # two-point PROBEs: 2q passes of the suffix


def _suffix_and_prefix(cut: int, inputs: int, passes: int = 1) -> tuple[float, float]:
    costs = cost.layer_costs(zoo.build("cnn", seed=3))
    per = cost.latency_of(costs, "m55", inputs=inputs, passes=passes).per_layer
    return sum(per[cut:]), sum(per[:cut]) / passes


def _seconds(ns: int) -> float:
    return ns * 1e-9


def near(x: float):
    """A modeled duration, which the answer carries in whole nanoseconds."""
    return pytest.approx(x, rel=1e-6, abs=2e-9)


def _cut(twin: DeviceTwin) -> int:
    return plan.probe_scratch(twin.model.graph, twin.model.trained, 1).cut


def test_an_item_read_before_starts_at_the_cut_in_the_modeled_time():
    blob, shape, classes = cnn_blob(3, "last:1")
    twin = DeviceTwin()
    with EmulatorBackend(twin) as client:
        client.load_model(blob)
        client.load_data(0, *data(1, shape, classes), classes)
        cut = _cut(twin)
        assert cut > 0
        suffix, prefix = _suffix_and_prefix(cut, N)

        def ev() -> float:
            return _seconds(client._exchange(m.EvalRequest(slot=0, start=0, count=N)).duration_ns)

        first, second = ev(), ev()
        assert first == near(suffix + prefix)  # every entry made now
        assert second == near(suffix)  # every entry read back
        assert twin.stats["prefix_cache_made"] == N

        seeds = np.array([5, 6], np.uint32)
        r = client.probe(slot=0, batch_size=8, batch_seed=9, eps=40, seeds=seeds)
        per_item = _suffix_and_prefix(cut, 1, 2 * Q)
        assert _seconds(r.duration_ns) == near(8 * per_item[0])

        client.load_data(0, *data(7, shape, classes), classes)  # new books: nothing is held
        r = client.probe(slot=0, batch_size=8, batch_seed=9, eps=40, seeds=seeds)
        fresh = len(set(twin_batch(9, N, 8)))
        want = 8 * per_item[0] + fresh * per_item[1]
        assert _seconds(r.duration_ns) == near(want)
        assert twin.stats["prefix_cache_made"] == N + fresh
        assert ev() == near(suffix + (N - fresh) * prefix / N)


def twin_batch(batch_seed: int, n: int, b: int) -> list[int]:
    from hilbench.zo.rng import batch_indices

    return batch_indices(batch_seed, n, b).tolist()


def test_items_past_the_cap_run_their_prefix_every_time():
    """A slot's part holds what leaves the PROBE its copy and 32 entries: with a small
    arena only the first items get an entry; the others pay the prefix at every EVAL."""
    blob, shape, classes = cnn_blob(3, "last:1")
    probe_twin = DeviceTwin()
    with EmulatorBackend(probe_twin) as client:
        client.load_model(blob)
        client.load_data(0, *data(1, shape, classes), classes)
        sc = plan.probe_scratch(probe_twin.model.graph, probe_twin.model.trained, 1)
        spare = probe_twin.arena.free() - sc.copy_bytes - 32 * sc.prefix_bytes
    cap = 20
    arena = probe_twin.arena_bytes - spare + cap * sc.prefix_bytes + 16  # room for 20 + bitmap
    twin = DeviceTwin(arena_bytes=arena)
    with EmulatorBackend(twin) as client:
        client.load_model(blob)
        client.load_data(0, *data(1, shape, classes), classes)
        assert twin._books.parts == {}
        suffix, prefix = _suffix_and_prefix(_cut(twin), N)
        ev = [client._exchange(m.EvalRequest(slot=0, start=0, count=N)) for _ in range(2)]
        assert twin._books.parts[0].cap == cap
        assert _seconds(ev[0].duration_ns) == near(suffix + prefix)
        assert _seconds(ev[1].duration_ns) == near(suffix + (N - cap) * prefix / N)
        assert (ev[0].correct, ev[0].loss_sum_q16) == (ev[1].correct, ev[1].loss_sum_q16)


def test_the_books_forget_every_part_when_the_store_changes():
    books = PrefixBooks()
    books.hold(1, 5_776)  # room 5,776 - 512 (copy) - 32 x 64 = 3,216: 50 entries + a bitmap
    read = books.read(0, 100, 64, 512, [3, 3, 99, 99])
    assert (read.fresh, read.uncached) == (1 + 2, 2)  # item 3 made once; 99 has no entry
    assert books.parts[0].cap == 50 and books.scratch() == 5_776 - 16 - 50 * 64
    assert books.read(0, 100, 64, 512, [3]).fresh == 0
    books.hold(1, 5_776)  # the same books: kept
    assert books.read(0, 100, 64, 512, [3]).fresh == 0
    books.hold(2, 5_776)  # an upload or a discard: gone
    assert books.parts == {} and books.read(0, 100, 64, 512, [3]).fresh == 1
