"""The ZOCF section: byte layout, validation against a model, layer selection."""

from types import SimpleNamespace

import numpy as np
import pytest

from hilbench.npu import zoo
from hilbench.npu.graph import Op, Tensor
from hilbench.zo import perturb, zocf
from hilbench.zo.zocf import TensorZo, ZocfError, ZoConfig


@pytest.fixture(scope="module")
def mlp():
    return zoo.build("mlp", seed=0)


def test_defaults_round_trip_and_name_every_weight(mlp):
    cfg = ZoConfig()
    assert ZoConfig.from_bytes(cfg.to_bytes()) == cfg
    assert len(cfg.to_bytes()) == 20
    assert [t.name for t in zocf.resolve(cfg, mlp)] == mlp.trainable()


def test_full_config_round_trips_byte_exactly(mlp):
    names = list(mlp.tensors)
    cfg = ZoConfig(
        distribution="uniform",
        scaling="adaptive",
        estimator="one-sided",
        rounding="stochastic",
        master="int16",
        pool_size=1024,
        pool_seed=0xDEADBEEF,
        tensors=(
            TensorZo(names.index("fc1_w"), 24, 0, tuple(range(1, 11))),
            TensorZo(names.index("fc1_b"), 16, 8),
        ),
    )
    data = cfg.to_bytes()
    assert len(data) == 20 + (8 + 12) + 8
    assert data[:8] == bytes([1, 2, 1, 1, 1, 1, 2, 0])
    assert ZoConfig.from_bytes(data) == cfg
    tr = zocf.resolve(cfg, mlp)
    assert [t.kind for t in tr] == ["weight", "bias"]
    assert tr[0].eps_mult.shape == (10, 1)  # one per row (axis 0), broadcast over the row
    np.testing.assert_array_equal(tr[0].eps_mult[:, 0], np.arange(1, 11))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b[:10], "ZOCF section is 10 bytes, the header needs 20"),
        (lambda b: bytes([2]) + b[1:], "ZOCF version 2, this device reads 1"),
        (
            lambda b: b[:16] + bytes([1, 0, 0, 0]) + b[20:],
            "ZOCF reserved header word is 1, must be 0",
        ),
        (
            lambda b: b[:1] + bytes([9]) + b[2:],
            "ZOCF distribution code 9 unknown: 0 rademacher, 1 gaussian, 2 uniform",
        ),
        (lambda b: b[:2] + bytes([2]) + b[3:], "ZOCF scaling code 2 unknown: 0 fixed, 1 adaptive"),
        (
            lambda b: b[:3] + bytes([5]) + b[4:],
            "ZOCF estimator code 5 unknown: 0 two-point, 1 one-sided",
        ),
        (
            lambda b: b[:4] + bytes([3]) + b[5:],
            "ZOCF rounding code 3 unknown: 0 nearest, 1 stochastic",
        ),
        (
            lambda b: b[:5] + bytes([7]) + b[6:],
            "ZOCF master code 7 unknown: 0 q16, 1 int16, 2 int8",
        ),
        (
            lambda b: b[:8] + (65537).to_bytes(4, "little") + b[12:],
            "ZOCF pool_size 65537 outside 0..65536",
        ),
        (
            lambda b: b[:6] + (129).to_bytes(2, "little") + b[8:],
            "ZOCF has 129 entries, this device trains at most 128 tensors",
        ),
        (lambda b: b + b"\0\0\0\0", "ZOCF has 4 unexpected trailing bytes"),
        (lambda b: b[:6] + bytes([3, 0]) + b[8:], "ZOCF truncated in entry 1"),
        (
            lambda b: b[:24] + bytes([5, 0]) + b[26:],
            "ZOCF truncated in entry 0's channel multipliers",
        ),
        (
            lambda b: b[:26] + bytes([0, 1]) + b[28:],
            "ZOCF entry 0: reserved or padding bytes are not 0",
        ),
    ],
)
def test_malformed_sections_are_refused_with_the_declared_text(mutate, message):
    data = ZoConfig(tensors=(TensorZo(1),)).to_bytes()
    with pytest.raises(ZocfError) as exc:
        ZoConfig.from_bytes(mutate(data))
    assert exc.value.message == str(exc.value) == message


def test_padding_of_channel_multipliers_must_be_zero():
    data = bytearray(ZoConfig(tensors=(TensorZo(1, 16, 0, (16, 16, 16)),)).to_bytes())
    assert len(data) == 20 + 8 + 4
    ZoConfig.from_bytes(bytes(data))
    data[-1] = 1
    with pytest.raises(ZocfError, match="reserved or padding bytes are not 0"):
        ZoConfig.from_bytes(bytes(data))


@pytest.mark.parametrize(
    ("tensors", "pool", "message"),
    [
        ((TensorZo(999),), 0, "ZOCF entry 0: tensor index 999 >= 7 tensors"),
        ((TensorZo(1), TensorZo(1)), 0, "ZOCF entry 1: tensor 1 listed twice"),
        ((TensorZo(0),), 0, "ZOCF entry 0: tensor 0 is not the weight or bias of an op"),
        ((TensorZo(1, 0),), 0, "ZOCF entry 0: eps_mult 0 outside 1..255"),
        ((TensorZo(2, 16, 13),), 0, "ZOCF entry 0: unit_shift 13 outside 0..12"),
        (
            (TensorZo(1, 16, 3),),
            0,
            "ZOCF entry 0: tensor 1 holds int8 weights, its unit_shift must be 0, not 3",
        ),
        (
            (TensorZo(1, 16, 0, (16, 16)),),
            0,
            "ZOCF entry 0: 2 channel multipliers for tensor 1 with 32 rows",
        ),
        (
            (TensorZo(1, 16, 0, (16,) * 5 + (0,) + (16,) * 26),),
            0,
            "ZOCF entry 0: channel multiplier 5 is 0",
        ),
        (
            (TensorZo(2), TensorZo(1)),
            32,
            "ZOCF pool of 32 is shorter than a row of tensor 1 (64 elements), "
            "so the row would repeat at a fixed distance",
        ),
    ],
)
def test_configs_that_do_not_fit_the_model_are_refused(mlp, tensors, pool, message):
    assert list(mlp.tensors)[1:3] == ["fc0_w", "fc0_b"]
    with pytest.raises(ZocfError) as exc:
        zocf.resolve(ZoConfig(pool_size=pool, tensors=tensors), mlp)
    assert exc.value.message == message


def test_a_bias_is_a_row_per_element_so_any_pool_fits_it(mlp):
    tr = zocf.resolve(ZoConfig(pool_size=1, tensors=(TensorZo(2, 16, 8),)), mlp)
    assert tr[0].kind == "bias" and tr[0].rows == (32, 1)
    cm = tuple(range(1, 33))
    tr = zocf.resolve(ZoConfig(tensors=(TensorZo(2, 16, 8, cm),)), mlp)
    np.testing.assert_array_equal(tr[0].eps_mult, np.arange(1, 33))


def test_default_entries_with_no_weight_tensor_and_the_trained_limit(mlp):
    nothing = mlp.with_constants({})
    nothing.ops = []
    assert zocf.resolve(ZoConfig(), nothing) == []  # inference only: nothing trains
    # 129 fully connected layers: the default (every weight tensor) is more than a device holds
    w = Tensor("w", (2, 2), "int8", data=np.zeros((2, 2), np.int8))
    tensors = {"x": Tensor("x", (2,), "int8")} | {f"w{i}": w for i in range(129)}
    ops = [Op("FULLY_CONNECTED", ["x", f"w{i}"], ["x"]) for i in range(129)]
    many = SimpleNamespace(tensors=tensors, ops=ops)
    with pytest.raises(ZocfError) as exc:
        zocf.resolve(ZoConfig(), many)
    assert exc.value.message == "the model has 129 weight tensors, this device trains at most 128"
    assert len(zocf.resolve(ZoConfig(tensors=(TensorZo(1),)), many)) == 1


def test_layer_selection_terms(mlp):
    assert zocf.select_tensors(mlp, "weights") == ["fc0_w", "fc1_w"]
    assert zocf.select_tensors(mlp, "biases") == ["fc0_b", "fc1_b"]
    assert zocf.select_tensors(mlp, "all") == ["fc0_w", "fc0_b", "fc1_w", "fc1_b"]
    assert zocf.select_tensors(mlp, "last:1") == ["fc1_w", "fc1_b"]
    assert zocf.select_tensors(mlp, "fc0_w,biases") == ["fc0_w", "fc0_b", "fc1_b"]
    for bad in ("conv*", "last:3", "last:x", "weights,,biases"):
        with pytest.raises(ValueError):
            zocf.select_tensors(mlp, bad)


def test_build_resolves_names_multipliers_and_defaults(mlp):
    cfg = zocf.build(mlp, layers="all", distribution="uniform", eps_mults={"fc1_*": 0.5})
    assert cfg.scaling == "adaptive"
    by_name = {list(mlp.tensors)[t.index]: t for t in cfg.tensors}
    assert by_name["fc1_w"].eps_mult == 8 and by_name["fc0_w"].eps_mult == 16
    assert by_name["fc0_b"].unit_shift == zocf.BIAS_UNIT_SHIFT
    pc = zocf.build(mlp, per_channel=True)
    assert len(pc.tensors[0].channel_mult) == 32
    with pytest.raises(ValueError, match="matches no trained"):
        zocf.build(mlp, eps_mults={"nothing*": 2.0})
    with pytest.raises(ValueError, match="shorter than a row"):
        zocf.build(mlp, pool_size=16)


def test_fresh_word_accounting(mlp):
    tr = zocf.resolve(ZoConfig(), mlp)
    assert zocf.fresh_words_per_seed(ZoConfig(), tr) == 64 + 10
    assert zocf.fresh_words_per_step(ZoConfig(), tr, q=4) == 8 * 74
    uni = ZoConfig(distribution="uniform")
    assert zocf.fresh_words_per_seed(uni, tr) == (2048 + 320) // 4
    pooled = ZoConfig(distribution="uniform", pool_size=256)
    assert zocf.fresh_words_per_seed(pooled, tr) == 16 + 5
    assert zocf.fresh_numbers_per_seed(pooled, tr) == 42
    sr = ZoConfig(rounding="stochastic")
    assert zocf.fresh_words_per_step(sr, tr, 1) == 2 * 74 + (2048 + 320) // 2
    # numbers: one per element fresh, one per row pooled; one per element rounding in APPLY
    assert zocf.fresh_numbers_per_step(ZoConfig(), tr, q=4) == 8 * 2368
    assert zocf.fresh_numbers_per_step(pooled, tr, q=4) == 8 * 42
    assert zocf.fresh_numbers_per_step(sr, tr, 1) == 2 * 2368 + 2368
    mem = zocf.memory_bytes(ZoConfig(master="int8", pool_size=256), tr)
    assert mem["master"] == 0 and mem["row_buffer"] == 64 and mem["pool"] == 256
    assert mem["tensors"] == 2 * zocf.TENSOR_BYTES and mem["scales"] == 2 * zocf.SCALE_BYTES


def test_zo_work_bytes_pads_each_master_and_each_part_to_16(mlp):
    """docs/firmware.md "ZO state": per trained weight tensor pad16(n * master bytes) (the
    int8 master: nothing), then pad16 of the pool, of the longest trained weight row, of the
    delta table (4 bytes per value of the distribution: 2, 17, 128), of the depthwise row
    cache (none here), of 32 bytes per trained tensor (its description) and of 4 per trained
    tensor (a PROBE's scale)."""
    cfg = zocf.build(mlp, layers="all")  # fc0_w 32 x 64, fc0_b 32, fc1_w 10 x 32, fc1_b 10
    tr = zocf.resolve(cfg, mlp)
    assert zocf.row_buffer_bytes(tr) == 64  # fc0_w's rows
    table = 4 * 32 + 16  # four trained tensors: descriptions, scales
    assert zocf.zo_work_bytes(cfg, tr) == 4 * 2048 + 4 * 320 + 64 + 16 + table
    i16 = cfg.replace(master="int16", pool_size=100)
    assert zocf.zo_work_bytes(i16, tr) == 2 * 2048 + 2 * 320 + 112 + 64 + 16 + table
    i8 = cfg.replace(master="int8", pool_size=1)
    assert zocf.zo_work_bytes(i8, tr) == 16 + 64 + 16 + table
    gauss = cfg.replace(master="int8", distribution="gaussian")
    assert zocf.zo_work_bytes(gauss, tr) == 64 + 80 + table  # 17 deltas: 68 -> 80
    uni = cfg.replace(master="int8", distribution="uniform")
    assert zocf.zo_work_bytes(uni, tr) == 64 + 512 + table
    odd = mlp.with_constants({})
    odd.tensors["fc1_w"].shape = (10, 33)  # 330 elements: int16 660 -> 672; rows of 33 -> 48
    odd.tensors["fc1_w"].data = np.zeros((10, 33), np.int8)
    tr = zocf.resolve(ZoConfig(), odd)
    two = 2 * 32 + 16  # two trained tensors
    assert zocf.zo_work_bytes(ZoConfig(master="int16"), tr) == 2 * 2048 + 672 + 64 + 16 + two
    assert zocf.zo_work_bytes(ZoConfig(master="int8"), tr) == 64 + 16 + two
    fc1 = ZoConfig(master="int8", tensors=(TensorZo(list(odd.tensors).index("fc1_w")),))
    assert zocf.zo_work_bytes(fc1, zocf.resolve(fc1, odd)) == 48 + 16 + 32 + 16
    biases = zocf.build(mlp, layers="biases", master="int8")
    # no row buffer and no delta table: a bias element's delta is computed as it is read
    assert zocf.zo_work_bytes(biases, zocf.resolve(biases, mlp)) == 2 * 32 + 16
    parts = zocf.memory_bytes(cfg.replace(master="int8"), zocf.resolve(cfg, mlp))
    assert parts == {
        "master": 0,
        "pool": 0,
        "row_buffer": 64,
        "delta_table": 8,
        "row_cache": 0,
        "tensors": 128,
        "scales": 16,
    }


def test_the_depthwise_row_cache_is_booked_only_for_fresh_samples(mobilenet):
    """A depthwise filter trained with fresh samples reads its stream through a cache of 32
    lines of 20 bytes (640); with a pool, or without depthwise filters, there is none."""
    dw = zocf.build(mobilenet, layers="dwconv*_w", master="int8")
    tr = zocf.resolve(dw, mobilenet)
    assert zocf.memory_bytes(dw, tr)["row_cache"] == 640
    pooled = dw.replace(pool_size=9, distribution="uniform")
    assert zocf.memory_bytes(pooled, tr)["row_cache"] == 0
    # the cache and 2 deltas (16) against a pool of 9 (16) and 128 deltas (512)
    assert zocf.zo_work_bytes(dw, tr) - zocf.zo_work_bytes(pooled, tr) == 640 + 16 - 16 - 512
    pw = zocf.build(mobilenet, layers="conv*_w", master="int8")
    assert zocf.memory_bytes(pw, zocf.resolve(pw, mobilenet))["row_cache"] == 0


@pytest.fixture(scope="module")
def mobilenet():
    return zoo.build("mobilenet_v2", seed=0, resolution=32)


def test_depthwise_rows_are_output_channels_so_a_small_pool_fits_mobilenet(mobilenet):
    """Rows of a depthwise filter [1, 3, 3, C] are its C channels of 9 taps: a pool of
    KH * KW = 9 is enough for the depthwise layers (it needed 3,024, a whole filter, when a
    depthwise filter was one row), and the longest row of the whole model sets the pool it
    needs (1,280, the classifier's input)."""
    names = list(mobilenet.tensors)
    dw = zocf.build(mobilenet, layers="dwconv*_w", distribution="uniform", pool_size=9)
    tr = zocf.resolve(dw, mobilenet)
    assert len(tr) == 17 and all(t.layout == perturb.ROWS_TRAILING for t in tr)
    assert all(t.rows == (t.shape[3], 9) for t in tr)
    # one fresh number per row (channel), ceil(rows / 2) words per depthwise filter
    channels = [t.shape[3] for t in tr]
    assert zocf.fresh_numbers_per_seed(dw, tr) == sum(channels)
    assert zocf.fresh_words_per_seed(dw, tr) == sum((c + 1) // 2 for c in channels)
    assert sum(channels) < sum(t.size for t in tr) / 8
    first = names.index("dwconv1_w")
    with pytest.raises(ValueError) as exc:
        zocf.build(mobilenet, layers="dwconv*_w", pool_size=8)
    assert str(exc.value) == (
        f"ZOCF pool of 8 is shorter than a row of tensor {first} (9 elements), "
        "so the row would repeat at a fixed distance (tensor 4 is dwconv1_w)"
    )
    assert first == 4
    every = zocf.resolve(zocf.build(mobilenet, layers="all", pool_size=1280), mobilenet)
    assert max(t.rows[1] for t in every) == 1280 and len(every) == 106
    with pytest.raises(ValueError, match="pool of 1279 is shorter than a row"):
        zocf.build(mobilenet, layers="all", pool_size=1279)


def test_eps_per_channel_works_on_depthwise_filters(mobilenet):
    cfg = zocf.build(mobilenet, per_channel=True)
    tr = {t.name: t for t in zocf.resolve(cfg, mobilenet)}
    entry = {list(mobilenet.tensors)[e.index]: e for e in cfg.tensors}
    dw = mobilenet.tensors["dwconv1_w"]
    assert dw.shape == (1, 3, 3, 16) and dw.qparams.axis == 3
    scale = dw.qparams.scale.astype(np.float64)
    want = np.clip(np.rint(16 * np.median(scale) / scale), 1, 255).astype(int)
    assert entry["dwconv1_w"].channel_mult == tuple(want)
    assert tr["dwconv1_w"].eps_mult.shape == (1, 1, 1, 16)
    np.testing.assert_array_equal(tr["dwconv1_w"].eps_mult.reshape(-1), want)
    assert tr["conv0_w"].eps_mult.shape == (16, 1, 1, 1)
    ZoConfig.from_bytes(cfg.to_bytes())  # every entry's n is its row count
