"""The firmware's benchmark program (device_fw/bench, benchmarks/bench_firmware.py) measures the
right computation: its report has the documented records, its forward outputs equal
hilbench.npu's (and TFLM's), its ZO step gives the twin's losses and weights. No timings are
asserted (benchmarks check speed, tests do not)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_firmware as bf

from hilbench.npu import zoo
from hilbench.npu.blob import to_blob


@pytest.fixture(scope="module")
def bench() -> Path:
    return bf.build_bench()


def _check_stats(kv: dict[str, str], runs: int) -> None:
    assert int(kv["runs"]) == runs
    assert 0 <= int(kv["min"]) <= int(kv["median"]) <= int(kv["max"])


def test_build_line(bench):
    rep = bf.run_bench(bench, "info")
    assert set(rep.build) == {"compiler", "flags", "clock", "tick_overhead"}
    assert rep.build["compiler"].split()[0] in ("gcc", "clang")
    assert "-O" in rep.build["flags"] and rep.build["clock"] == "ns (CLOCK_MONOTONIC)"
    assert rep.records == []
    done = subprocess.run([str(bench), "info", "--clock", "thread"], capture_output=True, text=True)
    assert bf.parse_report(done.stdout).build["clock"] == "ns (CLOCK_THREAD_CPUTIME_ID)"


def test_single_op_blob_output_equals_the_emulator(bench, tmp_path):
    """A depthwise op cut out of MobileNetV2 (rows strided in the blob, per-channel requant)."""
    g = zoo.build("mobilenet_v2", seed=0, alpha=0.35, resolution=32)
    op = next(op for op in g.ops if op.kind == "DEPTHWISE_CONV_2D")
    sg = bf.single_op_graph(g, op, "dw")
    x = np.random.default_rng(3).integers(-128, 128, (1, *sg.input_shape)).astype(np.int8)
    r = bf.sil_forward(bench, to_blob(sg), x, 7, tmp_path)
    want = sg.run(x).reshape(-1)
    assert r.ops == 1 and r.stable
    assert r.output.shape == want.shape and np.array_equal(r.output, want)
    assert np.array_equal(bf.Tflm(sg)(x).reshape(-1), want)
    # the raw report: one forward record with its keys, the output as hex of output bytes
    rep = bf.run_bench(bench, "forward", str(tmp_path / "model.blob"), str(tmp_path / "input.bin"),
                       "--runs", "5")  # fmt: skip
    f = rep.get("forward")
    assert int(f["input"]) == x.size and int(f["output"]) == want.size
    assert int(f["act_bytes"]) % 16 == 0 and f["stable"] == "1"
    _check_stats(f, 5)
    assert len(rep.get("output")["hex"]) == 2 * want.size


def test_add_cut_out_of_a_model_adds_its_input_to_itself(bench, tmp_path):
    g = zoo.build("mobilenet_v2", seed=0, alpha=0.35, resolution=32)
    op = next(op for op in g.ops if op.kind == "ADD")
    sg = bf.single_op_graph(g, op, "add")
    assert sg.ops[0].inputs == [op.inputs[0], op.inputs[0]]
    x = np.random.default_rng(4).integers(-128, 128, (1, *sg.input_shape)).astype(np.int8)
    r = bf.sil_forward(bench, to_blob(sg), x, 3, tmp_path)
    assert np.array_equal(r.output, sg.run(x).reshape(-1))


def test_op_rows_cover_every_op_once_per_shape():
    g = zoo.build("cnn", seed=0)
    mob = zoo.build("mobilenet_v2", seed=0, alpha=0.35, resolution=32)
    pool = zoo.build("resnet18", seed=0, width=0.25, resolution=32)
    rows = bf.op_rows([("CNN", g), ("MobileNetV2", mob)], ("ResNet18", pool))
    assert sum(r.counts.get("CNN", 0) for r in rows) == len(g.ops)
    assert sum(r.counts.get("MobileNetV2", 0) for r in rows) == len(mob.ops)
    kinds = {r.graph.ops[0].kind for r in rows}
    assert kinds == {
        "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MEAN", "RESHAPE",
        "MAX_POOL_2D", "AVERAGE_POOL_2D",
    }  # fmt: skip
    assert len({r.label for r in rows}) == len(rows)  # one row per shape


def test_zo_step_equals_the_twin(bench, tmp_path):
    """The MLP with q=3, B=5: the first PROBE's losses and the weights after the APPLYs equal
    the twin's; the split's parts add up to the PROBE and APPLY totals."""
    from hilbench.device import ModelState
    from hilbench.zo import loss
    from hilbench.zo import rng as zrng

    g = zoo.build("mlp", seed=2)
    tables = loss.LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    blob = to_blob(g, {"LOSS": tables.to_bytes()})
    r = np.random.default_rng(5)
    x = r.integers(-128, 128, (20, 64)).astype(np.int8)
    y = r.integers(0, 10, 20).astype(np.uint8)
    paths = [tmp_path / "m.blob", tmp_path / "x", tmp_path / "y"]
    for p, data in zip(paths, (blob, x.tobytes(), y.tobytes()), strict=True):
        p.write_bytes(data)
    q, b, runs, seed = 3, 5, 2, 9
    rep = bf.run_bench(
        bench, "zo", *map(str, paths), "--q", str(q), "--batch", str(b), "--runs", str(runs),
        "--seed", str(seed), "--item-runs", "4",
    )  # fmt: skip
    zo = rep.get("zo")
    assert (int(zo["q"]), int(zo["batch"]), int(zo["n_forward"])) == (q, b, 2 * q * b)
    assert int(zo["n_perturbed"]) == 2 * q * b and int(zo["trained"]) == 2
    for part in ("forward", "loss"):
        _check_stats(rep.get("zo_time", part=part), 4)
    for part in ("scale", "draw_rows", "draw_chunks", "probe", "apply"):
        _check_stats(rep.get("zo_time", part=part), runs)
    p = bf.split(rep, "probe")
    a = bf.split(rep, "apply")
    assert rep.get("zo_split", step="probe")["stat"] == "min"
    assert p["total"] == p["forward"] + p["loss"] + p["prng"] + p["perturb"]
    assert p["total"] == int(rep.get("zo_time", part="probe")["min"])
    assert a["total"] == a["prng"] + a["update"]

    st = ModelState.from_blob(blob)
    seeds = np.arange(seed, seed + q, dtype=np.uint32)
    idx = zrng.batch_indices(seed, len(y), b)
    lp, lm = st.probe(x[idx].reshape(-1, 64), y[idx], seeds, 2)
    losses = rep.get("zo_losses")
    assert [int(v) for v in losses["lp"].split(",")] == lp.tolist()
    assert [int(v) for v in losses["lm"].split(",")] == lm.tolist()
    check = rep.get("zo_check")
    assert int(check["crc_initial"], 16) == st.weights_crc()
    assert check["crc_probed"] == check["crc_initial"] and check["restored"] == "1"
    coeffs = np.clip((lp.astype(np.int64) - lm) * 64, -(2**24 - 1), 2**24 - 1).astype(np.int32)
    for _ in range(runs):
        st.apply(seeds, coeffs)
    assert int(check["crc_applied"], 16) == st.weights_crc() != int(check["crc_initial"], 16)


def test_bad_input_is_one_line(bench, tmp_path):
    g = zoo.build("mlp", seed=0)
    (tmp_path / "m.blob").write_bytes(to_blob(g))
    (tmp_path / "short").write_bytes(bytes(10))
    # an input of the wrong size: an error record naming both sizes, exit 1
    done = subprocess.run(
        [str(bench), "forward", str(tmp_path / "m.blob"), str(tmp_path / "short")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "message=\"the input has 10 bytes, the model's input 64" in done.stdout
    with pytest.raises(bf.BenchError, match="the input has 10 bytes"):
        bf.parse_report(done.stdout)
    # a blob the core refuses: its BAD_MODEL text
    (tmp_path / "bad.blob").write_bytes(b"HBM0" + bytes(60))
    done = subprocess.run(
        [str(bench), "forward", str(tmp_path / "bad.blob"), str(tmp_path / "short")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "error code=9 message=" in done.stdout
    # options and files: one line on stderr, exit 2
    for argv, needle in (
        (["forward", str(tmp_path / "nope"), "x"], "cannot open the model blob"),
        (["forward", "a"], "forward takes BLOB INPUT"),
        (["zo", "a", "b", "c", "--q", "0"], "--q 0 is outside 1..510"),
        (["frobnicate"], "unknown command"),
        (["info", "--clock", "wall"], "--clock takes monotonic or thread"),
        (["info", "--frob"], "unknown option or missing value: --frob"),
        (["forward", "a", "b", "--runs"], "unknown option or missing value: --runs"),
    ):
        done = subprocess.run([str(bench), *argv], capture_output=True, text=True)
        assert done.returncode == 2 and needle in done.stderr, (argv, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1
