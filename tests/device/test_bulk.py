"""Bulk uploads and the arena's books (docs/protocol.md "Bulk transfer", docs/firmware.md
"Memory"): every rule with the numbers it produces."""

import zlib

import numpy as np
import pytest
from devwire import data, in_session, loaded, model_blob, probe

from hilbench.device import Arena, ArenaFull, DeviceTwin, ModelState, pad16, plan
from hilbench.protocol import messages as m
from hilbench.protocol import spec
from hilbench.zo import zocf

GRAPH, BLOB = model_blob()
STATE = ModelState.from_blob(BLOB)
ACT = plan.act_bytes(GRAPH)
ZO = zocf.zo_work_bytes(STATE.zo, STATE.trained)
DATA = data()


def chunk(total: int, offset: int, blob: bytes, k: int, slot: int | None = None):
    part = blob[offset : offset + k]
    if slot is None:
        return m.LoadModelRequest(total_len=total, offset=offset, chunk=part)
    return m.LoadDataRequest(slot=slot, total_len=total, offset=offset, chunk=part)


def test_the_arena_books_of_a_loaded_model_and_data():
    wire = loaded()
    arena = wire.twin.arena
    # the MLP's activation plan; q16 masters, the row buffer, 2 deltas, 2 tensors' records
    assert (ACT, ZO) == (96, 9472 + 64 + 16 + 2 * 32 + 16)
    assert arena.model_region == pad16(len(BLOB)) + ACT + ZO
    assert arena.slot_bytes(0) == pad16(len(DATA))
    assert arena.slot_offset(0) == spec.DEFAULT_ARENA_BYTES - pad16(len(DATA))
    assert arena.free() == spec.DEFAULT_ARENA_BYTES - arena.model_region - pad16(len(DATA))


def test_offset_zero_restarts_and_discards_the_model_first():
    wire = loaded()
    before = wire.twin.arena.free()
    reply = wire.send(chunk(len(BLOB), 0, BLOB, 100))
    assert (reply.received, reply.complete, reply.model_crc32) == (100, False, 0)
    assert wire.send(m.WeightsCrcRequest()).code == m.ErrorCode.NO_MODEL  # gone at offset 0
    assert wire.send(probe()).code == m.ErrorCode.NO_MODEL
    assert wire.twin.arena.free() == before + ACT + ZO  # only the blob is held now
    # restart again: the half upload is dropped, received starts over
    assert wire.send(chunk(len(BLOB), 0, BLOB, 10)).received == 10
    assert wire.send(chunk(len(BLOB), 10, BLOB, 4000)).received == 4010
    reply = wire.send(chunk(len(BLOB), 4010, BLOB, 4000))
    assert reply.received == 8010
    reply = wire.send(chunk(len(BLOB), 8010, BLOB, 4000))
    assert reply.complete and reply.received == len(BLOB)
    assert wire.crc()[1] == 0


def test_a_wrong_offset_or_total_len_names_the_expected_offset_and_keeps_the_upload():
    wire = in_session(DeviceTwin())
    n = len(BLOB)
    name = "LOAD_MODEL request"
    reply = wire.send(chunk(n, 1000, BLOB, 10))
    assert reply.code == m.ErrorCode.BAD_ARGUMENT
    assert reply.message == spec.MESSAGES["BULK_NOT_STARTED"] % (name, 1000)
    assert wire.send(chunk(n, 0, BLOB, 3000)).received == 3000
    reply = wire.send(chunk(n, 2000, BLOB, 10))
    assert reply.message == spec.MESSAGES["BULK_OFFSET"] % (name, 2000, 3000)
    assert reply.message == "LOAD_MODEL request: chunk at offset 2000, expected offset 3000"
    reply = wire.send(chunk(n + 1, 3000, BLOB + b"x", 10))
    assert reply.message == spec.MESSAGES["BULK_TOTAL"] % (name, n + 1, n, 3000)
    # the upload in progress was kept through all three refusals
    assert wire.send(chunk(n, 3000, BLOB, 4000)).received == 7000
    reply = wire.send(chunk(n, 7000, BLOB, 4000))
    assert reply.complete and reply.model_crc32 == zlib.crc32(BLOB[:-4])


def test_model_crc32_is_the_blobs_trailer_and_differs_between_blobs():
    other = model_blob(seed=4)[1]
    crcs = []
    for blob in (BLOB, other):
        reply = in_session(DeviceTwin()).load_model(blob)
        assert reply.model_crc32 == int.from_bytes(blob[-4:], "little") == zlib.crc32(blob[:-4])
        crcs.append(reply.model_crc32)
    assert crcs[0] != crcs[1] and 0x2144DF1C not in crcs


def test_a_zero_byte_chunk_is_allowed_and_appends_nothing():
    wire = in_session(DeviceTwin())
    assert wire.send(chunk(len(BLOB), 0, BLOB, 0)).received == 0
    assert wire.send(chunk(len(BLOB), 0, BLOB, 0)).received == 0
    assert wire.send(chunk(len(BLOB), 0, BLOB, 600)).received == 600
    assert wire.send(chunk(len(BLOB), 600, BLOB, 0)).received == 600
    assert wire.send(m.LoadDataRequest(slot=2, total_len=5, offset=0, chunk=b"")).received == 0


def test_too_large_at_offset_zero_discards_the_old_model_and_keeps_nothing():
    twin = DeviceTwin(arena_bytes=pad16(len(BLOB)) + ACT + ZO + pad16(len(DATA)))
    wire = loaded(twin)
    assert twin.arena.free() == 0
    big = 2 * len(BLOB)
    reply = wire.send(m.LoadModelRequest(total_len=big, offset=0, chunk=BLOB[:10]))
    assert reply.code == m.ErrorCode.MODEL_TOO_LARGE
    free = twin.arena_bytes - pad16(len(DATA))  # the old model went first
    assert reply.message == (
        f"LOAD_MODEL request: total_len {big} needs {pad16(big)} bytes, "
        f"{free} of the {twin.arena_bytes}-byte arena are free"
    )
    assert twin.arena.model_region == 0 and twin.model is None
    assert wire.send(m.WeightsCrcRequest()).code == m.ErrorCode.NO_MODEL
    reply = wire.send(m.LoadModelRequest(total_len=big, offset=10, chunk=BLOB[10:20]))
    assert reply.message.endswith("no upload is in progress: expected offset 0")
    # data: the slot's old data goes first too
    too_big = twin.arena_bytes + 1
    reply = wire.send(m.LoadDataRequest(slot=0, total_len=too_big, offset=0, chunk=b""))
    assert reply.code == m.ErrorCode.MODEL_TOO_LARGE and 0 not in twin.slots
    assert twin.arena.free() == twin.arena_bytes


def test_too_large_at_completion_names_the_working_memory_and_leaves_no_model():
    arena = pad16(len(BLOB)) + ACT + ZO - 16  # the blob fits, its working memory does not
    twin = DeviceTwin(arena_bytes=arena)
    wire = in_session(twin)
    reply = wire.load_model(BLOB)
    assert reply.code == m.ErrorCode.MODEL_TOO_LARGE
    free = arena - pad16(len(BLOB))
    assert reply.message == spec.MESSAGES["MODEL_MEMORY"] % (ACT + ZO, ACT, ZO, free, arena)
    assert twin.model is None and twin.arena.model_region == 0
    assert wire.send(m.WeightsCrcRequest()).code == m.ErrorCode.NO_MODEL
    # 16 more bytes and the same blob loads
    assert in_session(DeviceTwin(arena_bytes=arena + 16)).load_model(BLOB).complete


def test_too_large_is_not_checked_on_the_chunks_between():
    arena = pad16(len(BLOB)) + ACT + ZO
    twin = DeviceTwin(arena_bytes=arena)
    wire = in_session(twin)
    assert wire.send(chunk(len(BLOB), 0, BLOB, 4000)).received == 4000
    assert twin.arena.free() == ACT + ZO
    # the blob's memory was taken at offset 0: the chunks after it never check again
    reply = wire.send(m.LoadDataRequest(slot=1, total_len=ACT + ZO + 1, offset=0, chunk=b""))
    assert reply.code == m.ErrorCode.MODEL_TOO_LARGE
    assert wire.send(chunk(len(BLOB), 4000, BLOB, 4000)).received == 8000
    assert wire.send(chunk(len(BLOB), 8000, BLOB, 4000)).complete
    assert twin.arena.free() == 0


def test_a_refused_model_blob_leaves_no_model():
    wire = loaded()
    bad = bytearray(BLOB)
    bad[len(bad) // 2] ^= 0xFF  # the trailer no longer matches
    reply = wire.load_model(bytes(bad))
    assert reply.code == m.ErrorCode.BAD_MODEL and "CRC" in reply.message.upper()
    assert wire.twin.model is None and wire.twin.arena.model_region == 0
    assert wire.send(probe()).code == m.ErrorCode.NO_MODEL
    assert wire.twin.slots[0] is not None  # the data survived


def test_a_refused_data_blob_leaves_the_slot_empty():
    wire = loaded()
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (3, 64)).astype(np.int8)
    labels = bytes([1, 12, 13])
    bad = np.array([3], "<u4").tobytes() + np.array([64, 10], "<u2").tobytes()
    bad += x.tobytes() + labels
    reply = wire.load_data(0, bad)
    assert reply.code == m.ErrorCode.BAD_ARGUMENT
    assert reply.message == "data blob: label 12 of item 1 is not below n_classes 10"
    assert 0 not in wire.twin.slots and wire.twin.arena.slot_bytes(0) == 0
    assert wire.send(probe()).code == m.ErrorCode.NO_DATA
    assert wire.send(probe()).message == "data slot 0 is empty: send LOAD_DATA first"
    assert wire.crc()[1] == 0  # the model survived


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"\x01\x00\x00", "data blob is 3 bytes, shorter than its 8-byte header"),
        (
            b"\x00\x00\x00\x00\x40\x00\x0a\x00",
            "data blob: field 'n_items' = 0 out of range 1..4294967295",
        ),
        (
            b"\x01\x00\x00\x00\x00\x00\x0a\x00\x05",
            "data blob: field 'item_size' = 0 out of range 1..65535",
        ),
        (
            b"\x01\x00\x00\x00\x01\x00\x00\x00\x05\x00",
            "data blob: field 'n_classes' = 0 out of range 1..65535",
        ),
        (
            b"\x02\x00\x00\x00\x01\x00\x02\x00\x05\x00\x00",
            "data blob is 11 bytes, its header says 12",
        ),
    ],
)
def test_each_data_blob_rule_in_order(blob, message):
    wire = in_session(DeviceTwin())
    reply = wire.load_data(3, blob)
    assert (reply.code, reply.message) == (m.ErrorCode.BAD_ARGUMENT, message)
    assert wire.twin.arena.free() == wire.twin.arena_bytes


def test_model_and_data_uploads_survive_each_other():
    wire = loaded()
    crc = wire.crc()
    assert wire.load_data(1, data(seed=5)).complete
    assert wire.crc() == crc
    n = len(BLOB)
    wire.send(chunk(n, 0, BLOB, 4000))  # a model upload in progress ...
    assert wire.load_data(2, data(seed=6)).complete  # ... a data upload in between ...
    assert wire.send(chunk(n, 4000, BLOB, 4000)).received == 8000
    assert wire.send(chunk(n, 8000, BLOB, 4000)).complete  # ... and the model completes
    assert sorted(wire.twin.slots) == [0, 1, 2]


def test_slots_stack_from_the_top_and_a_discard_moves_the_ones_below_up():
    arena = Arena(1000)
    arena.start_slot(2, 100)  # 112 bytes
    arena.start_slot(0, 30)  # 32
    arena.start_slot(1, 1)  # 16
    assert [arena.slot_offset(s) for s in (2, 0, 1)] == [888, 856, 840]
    arena.discard_slot(2)
    assert [arena.slot_offset(s) for s in (0, 1)] == [968, 952]
    arena.start_model(500)
    assert arena.free() == 1000 - 512 - 48
    with pytest.raises(ArenaFull) as full:
        arena.finish_model(448, 16)
    assert (full.value.needed, full.value.free, arena.model_region) == (464, 440, 0)
    with pytest.raises(ArenaFull):
        arena.start_slot(3, 945)  # 960 > 952 free
    arena.start_slot(3, 944)
    assert arena.free() == 8 and arena.slot_offset(3) == 8
