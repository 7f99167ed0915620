"""The native C engine (``hilbench.npu.native``): built where CI runs, every kernel table
this CPU runs (AVX-512 VNNI, AVX-VNNI, AVX2, ARM64 dot products, the portable C) byte-equal
to TFLM and to the numpy reference on the shapes the random oracle cases rarely reach (many
output channels, batched weight sets and biases, huge biases, in-place weight changes, long
reductions). The oracle tests in this directory already run every case through each table
(``oracle.BACKENDS``); test_native_isa.py runs every table, and reports those this CPU
cannot run."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hilbench.npu import native, program, zoo
from hilbench.npu.graph import Graph, Op, QParams, Tensor
from hilbench.npu.native import lowering
from hilbench.npu.ops import backend, conv2d, depthwise_conv2d
from hilbench.npu.ops import fully_connected as fc

from . import cases
from .oracle import BACKENDS, NATIVE_REQUIRED, graph_to_tflite, run_each, run_tflite, use
from .refimpl import mbqm

ISAS = native.runnable_isas()  # every kernel table this CPU runs (AVX2 and portable C here)


def _cpu_flags() -> set[str]:
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in info.splitlines():
        if line.split(":")[0].strip() in ("flags", "Features"):
            return set(line.split(":", 1)[1].split())
    return set()


def _expected_best() -> str | None:
    """The table the CPU's flags (Linux) call for, None where they cannot be read."""
    flags = _cpu_flags()
    if not flags:
        return None
    if platform.machine() in ("x86_64", "AMD64"):
        if {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= flags:
            return "avx512vnni+vbmi" if "avx512vbmi" in flags else "avx512vnni"
        if {"avx2", "fma", "bmi1", "bmi2"} <= flags:
            return "avxvnni" if "avx_vnni" in flags else "avx2"
        return "portable"
    if platform.machine() == "aarch64":
        return "neondot" if "asimddp" in flags else "portable"
    return None


def test_extension_is_built_and_is_the_default():
    if NATIVE_REQUIRED:
        assert native.available(), f"native engine missing: {native.IMPORT_ERROR}"
    if not native.available():
        pytest.skip(f"native engine not built on this platform: {native.IMPORT_ERROR}")
    assert {f"native-{isa}" for isa in ISAS} <= set(BACKENDS)
    assert "native-portable" in BACKENDS
    code = "from hilbench.npu.ops import backend; print(backend.name())"
    env = {k: v for k, v in os.environ.items() if k != "HILBENCH_NPU_BACKEND"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "native"


def test_the_best_table_is_the_one_the_cpu_calls_for():
    """So that 'auto' (and the oracle's first native variant) runs the fastest kernels the
    CPU has: read from /proc/cpuinfo independently of the engine's own CPUID checks."""
    if not native.available():
        pytest.skip("native engine not built")
    want = _expected_best()
    if want is None:
        pytest.skip("no /proc/cpuinfo flags to compare with")
    assert native.best_isa() == want
    assert native.runnable_isas()[0] == want
    assert native.active_isa() == want or native.isa() != "auto"
    assert "portable" in native.runnable_isas()


def test_isa_from_environment():
    code = "from hilbench.npu import native; print(native.isa(), native.active_isa())"
    env = {**os.environ, "HILBENCH_NPU_NATIVE_ISA": "portable"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["portable", "portable"]
    with pytest.raises(ValueError, match="unknown native ISA 'avx9000'"):
        native.set_isa("avx9000")


@pytest.mark.skipif(not native.available(), reason="native engine not built")
def test_an_isa_the_cpu_lacks_is_refused_in_one_line():
    lacking = [i for i in native.isas() if i not in native.runnable_isas()]
    other_arch = [i for i in native.KNOWN_ISAS if i not in native.isas()]
    for name in lacking:
        with pytest.raises(
            ValueError, match=re.escape(f"does not run the native engine's '{name}'")
        ) as e:
            native.set_isa(name)
        assert "\n" not in str(e.value) and "it runs: " in str(e.value)
    for name in other_arch:
        with pytest.raises(ValueError, match="is not in this build"):
            native.set_isa(name)
    assert native.isa() == "auto"
    if not lacking:
        return
    # the environment variable: refused when a graph runs, naming the variable
    code = (
        "import numpy as np\n"
        "from hilbench.npu import zoo\n"
        "g = zoo.build('mlp', seed=0)\n"
        "g.run(np.zeros((1, 64), np.int8))\n"
    )
    env = {**os.environ, "HILBENCH_NPU_NATIVE_ISA": lacking[0], "HILBENCH_NPU_BACKEND": "native"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert f"HILBENCH_NPU_NATIVE_ISA='{lacking[0]}'" in last and "it runs: " in last


def _native_vs_numpy(g, x, ov=None, *, all_layers=False):
    with backend.use("numpy"):
        want = g.run_all(x, ov) if all_layers else g.run(x, ov)
    for isa in ISAS:
        with backend.use("native"), native.use_isa(isa):
            got = g.run_all(x, ov) if all_layers else g.run(x, ov)
        if all_layers:
            assert set(got) == set(want)
            for name in want:
                np.testing.assert_array_equal(got[name], want[name], f"{isa}: {name}")
        else:
            np.testing.assert_array_equal(got, want, isa)
    return want


needs_native = pytest.mark.skipif(
    not (NATIVE_REQUIRED or native.available()), reason="native engine not built here"
)


@needs_native
@pytest.mark.parametrize(
    ("name", "kw"),
    [
        ("cnn", {}),
        ("mlp", {}),
        ("mobilenet_v2", {"alpha": 0.35, "resolution": 32, "classes": 5}),
        ("resnet18", {"width": 0.25, "resolution": 32}),
    ],
)
def test_batched_perturbed_sets_equal_the_reference(name, kw):
    """S = 5 weight sets (weights and biases moved) x N = 3 inputs, every activation."""
    g = zoo.build(name, seed=3, **kw)
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (3, *g.input_shape)).astype(np.int8)
    ov = {}
    for wn, bn in g.weight_tensors():
        w = g.tensors[wn].data.astype(np.int16)
        ov[wn] = np.clip(w + rng.integers(-2, 3, (5, *w.shape)), -127, 127).astype(np.int8)
        b = g.tensors[bn].data.astype(np.int64)
        ov[bn] = (b + rng.integers(-500, 501, (5, *b.shape))).astype(np.int32)
    want = _native_vs_numpy(g, x, ov, all_layers=True)
    assert want[g.output].shape == (5, 3, *g.output_shape)
    _native_vs_numpy(g, x, {k: v[2] for k, v in ov.items()})  # one set, not batched
    # only some layers batched (the rest shared), biases only, weights only
    first = g.weight_tensors()[0]
    _native_vs_numpy(g, x, {first[0]: ov[first[0]]})
    _native_vs_numpy(g, x, {first[1]: ov[first[1]]})


@needs_native
def test_batched_sets_match_tflm_one_by_one():
    g = zoo.build("mobilenet_v2", seed=1, alpha=0.35, resolution=32, classes=4)
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, (2, 32, 32, 3)).astype(np.int8)
    sets = []
    for _ in range(3):
        s = {}
        for wn, _ in g.weight_tensors():
            w = g.tensors[wn].data.astype(np.int16)
            s[wn] = np.clip(w + rng.integers(-1, 2, w.shape), -127, 127).astype(np.int8)
        sets.append(s)
    batched = {n: np.stack([s[n] for s in sets]) for n in sets[0]}
    each = run_each(g, x, batched)
    for i, s in enumerate(sets):
        want = run_tflite(graph_to_tflite(g.with_constants(s), len(x)), x)
        for variant in (b for b in BACKENDS if b.startswith("native")):
            np.testing.assert_array_equal(each[variant][i], want.reshape(each[variant][i].shape))


def _wide_case(rng, kind: str):
    """A conv or depthwise over many output channels (several 16-channel blocks, tails)."""
    win = cases._window(rng, 3)
    n = int(rng.integers(1, 4))
    if kind == "conv":
        cin = int(rng.choice([3, 5, 16, 24, 33]))
        o = int(rng.choice([16, 17, 40, 64, 65, 100]))
        w = cases._weights(rng, (o, *win["k_hw"], cin))
        return cases._filter_graph(conv2d.KIND, rng, (*win["in_hw"], cin), w, o, 0, win, n)
    cin = int(rng.choice([16, 20, 48]))
    m = int(rng.choice([1, 1, 2]))
    w = cases._weights(rng, (1, *win["k_hw"], cin * m))
    return cases._filter_graph(
        depthwise_conv2d.KIND,
        rng,
        (*win["in_hw"], cin),
        w,
        cin * m,
        3,
        {**win, "depth_multiplier": m},
        n,
    )


@needs_native
@pytest.mark.parametrize("kind", ["conv", "depthwise"])
def test_many_output_channels_match_tflm(kind):
    rng = np.random.default_rng(21 if kind == "conv" else 22)
    for case in range(12):
        g, x = _wide_case(rng, kind)
        want = run_tflite(graph_to_tflite(g, len(x)), x)
        for variant in (b for b in BACKENDS if b.startswith("native")):
            with use(variant):
                got = g.run(x)
            np.testing.assert_array_equal(got, want.reshape(got.shape), f"{variant} {case}")


@needs_native
def test_in_place_weight_change_is_seen():
    """Packed weights are reused only while the bytes are unchanged (compared every call)."""
    g = zoo.build("resnet18", seed=0, width=0.125, resolution=32)
    x = np.random.default_rng(0).integers(-128, 128, (2, 32, 32, 3)).astype(np.int8)
    with backend.use("native"):
        before = g.run(x)
        w = g.tensors[g.trainable()[3]].data
        w[...] = -w
        after = g.run(x)
    assert not np.array_equal(before, after)
    _native_vs_numpy(g, x)
    # a batched set written in place between calls
    sets = np.stack([w, w, w])
    with backend.use("native"):
        g.run(x, {g.trainable()[3]: sets})
    sets[1, 0] = 0
    _native_vs_numpy(g, x, {g.trainable()[3]: sets})


@needs_native
@pytest.mark.parametrize(
    ("name", "kw"),
    [
        ("resnet18", {"width": 0.125, "resolution": 32}),
        ("mobilenet_v2", {"alpha": 0.35, "resolution": 32}),
    ],
)
def test_kept_panels_follow_every_weight_change(name, kw):
    """With one weight set the engine keeps the packed GEMMs' panels while their weights
    are byte-equal to a copy of the ones it packed: one byte changed in place (first, middle,
    last of a tensor), the same bytes again, a tensor replaced, an unbatched override and
    back, a non-contiguous override, each table on its own (calls in a row on one table)
    and all tables in turn on the same plan (the panels' layout differs per table): every
    call gives the numpy reference's bytes, one input and three."""
    rng = np.random.default_rng(21)

    def check(g, x, isas, ov=None):
        with backend.use("numpy"):
            want = g.run(x, ov)
        for isa in isas:
            with backend.use("native"), native.use_isa(isa):
                np.testing.assert_array_equal(g.run(x, ov), want, isa)

    for isas in [[isa] for isa in ISAS] + [list(ISAS)]:
        g = zoo.build(name, seed=5, **kw)
        packed = [n for n in g.trainable() if g.tensors[n].data.ndim == 4][:3]
        assert packed
        for n in (1, 3):
            x = rng.integers(-128, 128, (n, *g.tensors[g.input].shape)).astype(np.int8)
            check(g, x, isas)
            for wn in packed:
                flat = g.tensors[wn].data.reshape(-1)
                for idx in (0, flat.size // 2, flat.size - 1):
                    flat[idx] = 127 if flat[idx] != 127 else -128
                    check(g, x, isas)
                check(g, x, isas)  # unchanged since the last call
            wn = packed[-1]
            g.tensors[wn].data = g.tensors[wn].data // 2  # a new array, other bytes
            check(g, x, isas)
            w = g.tensors[wn].data
            check(g, x, isas, {wn: -w})  # one set, overridden
            check(g, x, isas)  # and back to the graph's own
            strided = np.stack([-w, w], axis=-1)[..., 0]
            assert not strided.flags.c_contiguous
            check(g, x, isas, {wn: strided})  # copied per call
            check(g, x, isas)


@needs_native
def test_accumulator_plus_bias_wraps_like_int32():
    g = zoo.build("cnn", seed=2)
    x = np.random.default_rng(2).integers(-128, 128, (4, 8, 8, 1)).astype(np.int8)
    ov = {}
    for _, bn in g.weight_tensors():
        b = g.tensors[bn].data.copy()
        b[::2] = 2**31 - 1 - np.arange(b[::2].size)
        b[1::2] = -(2**31) + np.arange(b[1::2].size)
        ov[bn] = b
    _native_vs_numpy(g, x, ov, all_layers=True)


def _fc_graph(k: int, m: int, rng) -> Graph:
    w = rng.integers(-127, 128, (m, k)).astype(np.int8)
    t = {
        "x": Tensor("x", (k,), "int8", QParams([0.02], [-3])),
        "w": Tensor("w", (m, k), "int8", QParams([1e-4], [0]), w),
        "y": Tensor("y", (m,), "int8", QParams([0.5], [1])),
    }
    p = fc.prepare(0.02, -3, np.float32([1e-4]), 0.5, 1, "NONE")
    g = Graph(t, [Op(fc.KIND, ["x", "w"], ["y"], p)], "x", "y", "fc")
    g.validate()
    return g


@needs_native
def test_reduction_lengths_near_and_beyond_the_int32_bound():
    """K up to MAX_K runs on the engine (int32 cannot wrap); longer reductions are refused
    by the engine and run on the per-op kernels: the same bytes either way."""
    rng = np.random.default_rng(5)
    for k in (1, 3, 5, 2000, native.MAX_K):
        g = _fc_graph(k, 19, rng)
        program.lower(g, frozenset(), 1)
        _native_vs_numpy(g, rng.integers(-128, 128, (2, k)).astype(np.int8))
    g = _fc_graph(native.MAX_K + 1, 3, rng)
    with pytest.raises(native.Unsupported, match="int32 could wrap"):
        program.lower(g, frozenset(), 1)
    _native_vs_numpy(g, rng.integers(-128, 128, (2, native.MAX_K + 1)).astype(np.int8))


@needs_native
def test_input_and_override_errors_are_the_graphs():
    g = zoo.build("mlp", seed=0)
    with backend.use("native"), pytest.raises(Exception, match="expected int8"):
        g.run(np.zeros((2, 64), np.float32))
    with backend.use("native"), pytest.raises(Exception, match="weight sets"):
        w0, w1 = g.trainable()[:2]
        g.run(
            np.zeros((2, 64), np.int8),
            {w0: np.stack([g.tensors[w0].data] * 2), w1: np.stack([g.tensors[w1].data] * 3)},
        )


@needs_native
@pytest.mark.parametrize("mode", ["direct", "packed", "packed-im2col"])
def test_every_gemm_through_either_kernel(mode, monkeypatch):
    """Each layer picks the direct or the packed GEMM by shape (packed convs read their
    padded input in place, or im2col rows); force each kernel on every layer (random convs
    over many channel counts, FC, whole models) and compare."""
    if mode == "direct":
        monkeypatch.setattr(native, "DIRECT_K", 1)
        monkeypatch.setattr(native, "DIRECT_RATIO", 0)
        monkeypatch.setattr(native, "PORTABLE_DIRECT_RATIO", 0)
    else:
        monkeypatch.setattr(native, "DIRECT_RATIO", 10**9)
        monkeypatch.setattr(native, "PORTABLE_DIRECT_RATIO", 10**9)
        monkeypatch.setattr(native, "IMPLICIT", mode == "packed")
    rng = np.random.default_rng(31)
    for i in range(16):
        g, x = _wide_case(rng, "conv") if i % 2 else cases.CASES["conv"](rng)
        _native_vs_numpy(g, x)
    for k in (1, 7, 64, 65, 300):
        g = _fc_graph(k, 21, rng)
        _native_vs_numpy(g, rng.integers(-128, 128, (3, k)).astype(np.int8))
    for name, kw in (("resnet18", {"width": 0.25, "resolution": 32}), ("mlp", {})):
        g = zoo.build(name, seed=4, **kw)
        x = rng.integers(-128, 128, (2, *g.input_shape)).astype(np.int8)
        w = g.trainable()[-2]
        sets = np.stack([g.tensors[w].data, -g.tensors[w].data])
        _native_vs_numpy(g, x, {w: sets}, all_layers=True)


@needs_native
@pytest.mark.parametrize(
    ("name", "kw"),
    [
        ("mobilenet_v2", {"alpha": 0.35, "resolution": 32, "classes": 5}),
        ("resnet18", {"width": 0.25, "resolution": 32}),
        ("cnn", {}),
    ],
)
def test_one_input_shares_the_unbatched_prefix(name, kw):
    """With one input, ops before the first batched constant run once (set 0) and their
    results (and that op's im2col rows) serve every set: batch the first, a middle or the
    last layer, or only a bias, and compare every activation."""
    g = zoo.build(name, seed=5, **kw)
    rng = np.random.default_rng(12)
    x = rng.integers(-128, 128, (1, *g.input_shape)).astype(np.int8)
    pairs = g.weight_tensors()
    for wn, bn in (pairs[0], pairs[len(pairs) // 2], pairs[-1]):
        w = g.tensors[wn].data.astype(np.int16)
        ws = np.clip(w + rng.integers(-3, 4, (4, *w.shape)), -127, 127).astype(np.int8)
        b = g.tensors[bn].data.astype(np.int64)
        bs = (b + rng.integers(-900, 901, (4, *b.shape))).astype(np.int32)
        for ov in ({wn: ws}, {bn: bs}, {wn: ws, pairs[-1][0]: np.stack([pairs_w(g, -1)] * 4)}):
            _native_vs_numpy(g, x, ov, all_layers=True)
            _native_vs_numpy(g, x, ov)


@needs_native
def test_first_batched_conv_keeps_its_explicit_rows():
    """Several sets on one input: the first batched conv (MobileNetV2's stem) reads the same
    input in every set, so it runs on explicit im2col rows made once and kept (not on the
    padded input in place, per set); with one set or several inputs it stays implicit. The
    bytes are compared by test_one_input_shares_the_unbatched_prefix (its stem batched)."""
    g = zoo.build("mobilenet_v2", seed=5, alpha=0.35, resolution=32, classes=5)
    stem = g.weight_tensors()[0][0]
    f = native.F
    for sets, inputs, shared in ((4, 1, True), (1, 1, False), (4, 2, False)):
        plan = program.lower(g, frozenset({stem}), sets, inputs)
        first = plan.prog[1]
        assert first[f["KIND"]] == native.OP_GEMM and first[f["IM2COL"]]
        assert first[f["IMPLICIT"]] == int(not shared), (sets, inputs)
        assert first[f["KEEP"]] == 1


def pairs_w(g, i):
    return g.tensors[g.weight_tensors()[i][0]].data


@needs_native
@pytest.mark.parametrize("merged", [True, False])
def test_requantization_with_and_without_the_merged_rounding(merged, monkeypatch):
    """Layers whose channels all shift right use the merged rounding (x86 kernels; on AVX2
    and AVX-VNNI its correction by the product's sign), the others (and every layer here when
    it is switched off) TFLM's steps; the random oracle cases have both kinds, this covers
    whole models both ways."""
    if not merged:
        monkeypatch.setattr(lowering, "fast_requant", lambda mult, shift: False)
    rng = np.random.default_rng(41)
    for name, kw in (
        ("mobilenet_v2", {"alpha": 0.35, "resolution": 32, "classes": 5}),
        ("resnet18", {"width": 0.25, "resolution": 32}),
    ):
        g = zoo.build(name, seed=6, **kw)
        plan = program.lower(g, frozenset(), 1)
        fast = sum(int(f[native.F["FASTRQ"]]) for f in plan.prog[1:])
        assert (fast > 0) == merged
        x = rng.integers(-128, 128, (2, *g.input_shape)).astype(np.int8)
        _native_vs_numpy(g, x, all_layers=True)


def test_merged_rounding_by_the_sign_is_tflms():
    """The merged rounding (p + 2^30 + 2^(30+r) - [p < -2^30] 2^31) >> (31 + r) may test
    p < 0 instead (AVX2's VBLENDVPD on the product's sign): equal to TFLM's
    MultiplyByQuantizedMultiplier for every r >= 1, across the products where the tests
    differ (p in [-2^30, 0)) and at random, every kind of multiplier included."""

    def by_sign(v: int, m: int, r: int) -> int:
        p = v * m
        return (p + 2**30 + 2 ** (30 + r) - (2**31 if p < 0 else 0)) >> (31 + r)

    rng = np.random.default_rng(44)
    for r in range(1, 32):
        for m in (0, 1, 999, 2**29, 2**30, 2**30 + 1, 2**31 - 1, int(rng.integers(0, 2**31))):
            vs = [-1, -2, -3, 0, 1, -(2**31), 2**31 - 1]
            vs += [-(2**30) // max(m, 1), -(2**30) // max(m, 1) - 1, 2**30 // max(m, 1)]
            vs += rng.integers(-(2**31), 2**31, 20).tolist()
            for v in vs:
                v = max(-(2**31), min(2**31 - 1, int(v)))
                assert by_sign(v, m, r) == mbqm(v, m, -r), (v, m, r)


@needs_native
def test_non_contiguous_inputs_and_overrides():
    """Views (strided, transposed back) are accepted and give the same bytes."""
    g = zoo.build("cnn", seed=8)
    rng = np.random.default_rng(13)
    xs = rng.integers(-128, 128, (6, 8, 8, 1)).astype(np.int8)[::2]
    assert not xs.flags.c_contiguous
    wn = g.trainable()[1]
    w = g.tensors[wn].data
    sets = np.stack([w, -w, w // 2], axis=-1)  # (..., 3): move the set axis to the front
    ov = {wn: np.moveaxis(sets, -1, 0)}
    assert not ov[wn].flags.c_contiguous
    _native_vs_numpy(g, xs, ov, all_layers=True)
    _native_vs_numpy(g, xs, {wn: ov[wn][1]})


@needs_native
def test_replaced_arrays_are_seen_and_released():
    """The plan keeps the buffers of the arrays it was last given (ViewCache): a tensor whose
    data is replaced by a new array is read from the new one, and the old one is let go."""
    import gc
    import weakref

    g = zoo.build("mlp", seed=9)
    x = np.random.default_rng(14).integers(-128, 128, (3, 64)).astype(np.int8)
    wn = g.trainable()[0]
    with backend.use("native"):
        g.run(x)
        old = weakref.ref(g.tensors[wn].data)
        g.tensors[wn].data = -g.tensors[wn].data
        got = g.run(x)
    gc.collect()
    assert old() is None
    with backend.use("numpy"):
        np.testing.assert_array_equal(got, g.run(x))
    # overrides: the last ones are held until others replace them
    ov = {wn: np.stack([g.tensors[wn].data] * 2)}
    with backend.use("native"):
        g.run(x, ov)
        held = weakref.ref(ov[wn])
        ov = {wn: np.stack([g.tensors[wn].data // 3] * 2)}
        g.run(x, ov)
    gc.collect()
    assert held() is None
    _native_vs_numpy(g, x, ov)


@needs_native
def test_threads_share_a_graph():
    """The engine computes without the GIL; calls on one graph from several threads are
    serialized per plan and each gets its own inputs' outputs."""
    import threading

    g = zoo.build("resnet18", seed=10, width=0.125, resolution=32)
    rng = np.random.default_rng(15)
    xs = [rng.integers(-128, 128, (2, 32, 32, 3)).astype(np.int8) for _ in range(4)]
    with backend.use("numpy"):
        want = [g.run(x) for x in xs]
    got: dict[int, list[np.ndarray]] = {}

    def work(i: int) -> None:
        got[i] = [g.run(xs[i]) for _ in range(5)]

    with backend.use("native"):
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    for i in range(4):
        for y in got[i]:
            np.testing.assert_array_equal(y, want[i])
