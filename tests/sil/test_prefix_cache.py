"""The prefix cache (core/model.c, docs/firmware.md "The prefix cache"): the firmware keeps each
data slot's activations at the frozen cut, made the first time an EVAL or a PROBE needs an
item, and reads them back after. The twin with ``prefix_cache = False`` (every pass from the
input) is the reference: every EVAL and PROBE answer of the SIL, and of the twin with its own
cache, equals its answer across a sequence that reuses the entries (EVAL twice, PROBEs and
APPLYs in between), reloads a slot with new content, loads another slot, and reloads the model
(other weights with the same cut, then every layer trained: no cut). A stale entry would show
as an answer the reference does not give.
"""

from __future__ import annotations

import numpy as np

from hilbench.backend.emulate import EmulatorBackend
from hilbench.backend.sil import SilBackend
from hilbench.device import DeviceTwin
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.protocol import messages as m
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables

N = 48  # items per slot


def cnn_blob(seed: int, layers: str) -> tuple[bytes, tuple[int, ...], int]:
    g = zoo.build("cnn", seed=seed)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    cfg = zocf.build(g, layers=layers)
    blob = to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()})
    return blob, tuple(g.tensors[g.input].shape), int(np.prod(g.tensors[g.output].shape))


def data(seed: int, shape: tuple[int, ...], classes: int) -> tuple[np.ndarray, np.ndarray]:
    r = np.random.default_rng(seed)
    return r.integers(-128, 128, (N, *shape)).astype(np.int8), r.integers(0, classes, N).astype(
        np.uint8
    )


def sequence(client) -> list:
    """Every answer of a run that reuses, then must drop, the cache's entries."""
    out = []
    blob, shape, classes = cnn_blob(3, "last:1")

    def ev(slot: int, start: int = 0, count: int = N) -> None:
        r = client._exchange(m.EvalRequest(slot=slot, start=start, count=count))
        out.append(("eval", slot, r.correct, r.loss_sum_q16))

    def probe(slot: int, batch_seed: int, seeds) -> np.ndarray:
        r = client.probe(slot=slot, batch_size=8, batch_seed=batch_seed, eps=40, seeds=seeds)
        out.append(("probe", slot, r.loss_plus.tolist(), r.loss_minus.tolist()))
        return (r.loss_plus.astype(np.int64) - r.loss_minus) * 4

    def step(slot: int, batch_seed: int) -> None:
        seeds = np.array([batch_seed, batch_seed + 1], np.uint32)
        coeffs = np.clip(probe(slot, batch_seed, seeds), -(2**20), 2**20).astype(np.int32)
        out.append(("apply", client.apply(seeds, coeffs)))

    client.load_model(blob)
    client.load_data(0, *data(1, shape, classes), classes)
    client.load_data(1, *data(2, shape, classes), classes)
    ev(1)  # every entry of slot 1 made
    ev(1)  # read back
    ev(1, 5, 20)
    for k in range(3):  # entries of slot 0 made and read by PROBEs, the head trained
        step(0, 100 + k)
    ev(1)  # the new head over the kept entries
    client.load_data(1, *data(7, shape, classes), classes)  # new content, same size
    ev(1)
    client.load_data(2, *data(8, shape, classes), classes)  # another slot: the books change
    ev(1)
    step(0, 200)
    client.load_model(cnn_blob(4, "last:1")[0])  # other weights, the same cut
    ev(1)
    step(0, 300)
    ev(0)
    client.load_model(cnn_blob(3, "all")[0])  # every layer trains: no cut, no cache
    for k in range(2):
        step(0, 400 + k)
    ev(1)
    client.load_model(blob)  # the first model again: its entries must be made anew
    ev(1)
    out.append(("crc", client.weights_crc()))
    return out


def test_the_prefix_cache_answers_as_the_twin_without_one(sil_path):
    reference = DeviceTwin()
    reference.prefix_cache = False
    with EmulatorBackend(reference) as twin:
        want = sequence(twin)
    with EmulatorBackend(DeviceTwin()) as twin:  # the twin's own cache (hilbench/device)
        assert sequence(twin) == want
    with SilBackend(str(sil_path)) as sil:
        got = sequence(sil)
    assert got == want
    evals = [e for e in want if e[0] == "eval" and e[1] == 1 and e[2:] != ()]
    # the sequence would notice a stale entry: slot 1's answers move with its content, the
    # head's training and each model
    assert len({e[2:] for e in evals}) >= 5, evals


def test_the_run_line_books_the_cache_in_the_arena_the_device_has_free():
    """hilbench run's line (session._cache_parts): the free bytes it books are the twin's
    after the same uploads, and the parts are plan.prefix_cache's there; no cut, no line."""
    from hilbench import session
    from hilbench.device import plan

    blob, shape, classes = cnn_blob(3, "last:1")
    (x0, y0), (x1, y1) = data(1, shape, classes), data(2, shape, classes)
    twin = DeviceTwin()
    with EmulatorBackend(twin) as client:
        client.load_model(blob)
        client.load_data(0, x0, y0, classes)
        client.load_data(1, x1, y1, classes)
        free = twin.arena.free()
    x0, x1 = x0.reshape(N, -1), x1.reshape(N, -1)
    parts = session._cache_parts(blob, twin.arena_bytes, x0, x1)
    st = twin.model
    assert parts == plan.prefix_cache(st.graph, st.trained, free, [(1, N), (0, N)])
    assert [(p.slot, p.cap) for p in parts] == [(1, N), (0, N)] and parts[0].entry == 256
    line = session._prefix_cache_line(blob, twin.arena_bytes, x0, x1)
    assert "256 B each, of 48 of 48 test items, 48 of 48 training items" in line
    assert session._prefix_cache_line(cnn_blob(3, "all")[0], twin.arena_bytes, x0, x1) == ""


def test_a_head_grad_whose_accumulators_reach_the_cache_forgets_it(sil_path):
    """HEAD_GRAD's int32 accumulators take the free region from its bottom, the cache sits at
    its top and leaves the PROBE's reserve (its copy and 32 entries): a head of 1,024 -> 10
    (41,000 B of accumulators) over a cut of 1,024 elements (a reserve of 36,880 B) with a
    full cache reaches its bitmap and first entries. The firmware forgets the cache first (it
    read stale entries after such a HEAD_GRAD before), and the twin's books do the same."""
    g = zoo.build_mlp((8, 1024, 1024, 10), seed=1)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    blob = to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": zocf.build(g, layers="fc1_b").to_bytes()})
    n = 4000  # more items than the cache holds: it fills the free region to the reserve
    r = np.random.default_rng(0)
    x, y = r.integers(-128, 128, (n, 8)).astype(np.int8), r.integers(0, 10, n).astype(np.uint8)

    def answers(client) -> list[int]:
        out = []
        client.load_model(blob)
        client.load_data(0, x, y, 10)

        def ev(start: int, count: int) -> None:
            e = client._exchange(m.EvalRequest(slot=0, start=start, count=count))
            out.append(e.loss_sum_q16)

        ev(0, 64)  # entries made (the cache's part holds every item it has room for)
        for k in range(3):
            rates = np.full(10, 30000, np.int32)
            h = client.head_grad(slot=0, batch_size=64, batch_seed=50 + k, round_seed=4,
                                 rates=rates, bias_gain=1)  # fmt: skip
            out.append(h.head_crc)
            ev(0, 3)  # the entries the accumulators reached
            ev(0, 64)  # and those whose bits they did
        return out

    twin = DeviceTwin()
    with EmulatorBackend(twin) as client:
        want = answers(client)
        made = twin.stats["prefix_cache_made"]
        books = twin._books
        assert books.parts[0].cap < n and books.scratch() < 41_000  # the overlap is real
    assert made == 4 * 64  # made again after each HEAD_GRAD
    with SilBackend(str(sil_path)) as sil:
        assert answers(sil) == want
