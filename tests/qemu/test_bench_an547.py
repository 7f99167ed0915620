"""benchmarks/bench_an547.py on a tiny configuration (the MLP, one seed, a batch of two), so the
instruction-count figures of docs/firmware.md cannot rot: both images build and run under
QEMU, their outputs equal the emulator's, Helium needs fewer instructions than scalar on the
FC rows, and the ZO step's parts add up to its total in both images; and ``--kernels`` (the
kernels alone on the CMSIS-NN anchor's shapes) meets issue 25's ratios with equal outputs."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.cli_helpers import ROOT

BENCH = ROOT / "benchmarks" / "bench_an547.py"
NUM = r"([\d,]+)"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )


def _n(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_benchmark_runs_on_the_mlp_and_its_figures_hold_together():
    done = _run("--models", "mlp", "--q", "1", "--batch", "2", "--runs", "1")
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-2000:]
    assert "MISMATCH" not in out and "DIFFER" not in out
    assert "unit: instructions (QEMU -icount shift=5)" in out
    assert "seconds" not in out.replace("never seconds", "")

    rows = dict(
        (m.group(1).strip(), (_n(m.group(2)), _n(m.group(3))))
        for m in re.finditer(rf"^  (\S.{{35}})\s+\d*\s+{NUM}\s+{NUM}\s+[\d.]+x", out, re.M)
    )
    fc = [v for k, v in rows.items() if k.startswith("fc ")]
    assert len(fc) == 2, rows
    for scalar, mve in fc:
        assert scalar > 2 * mve > 0  # Helium: fewer instructions on every FC row
    scalar, mve = rows["whole model, one blob"]
    assert scalar >= 4 * mve, (scalar, mve)  # the MLP is two FCs: the issue's 4x target
    s_sum, m_sum = rows["sum of its ops (x count)"]
    assert s_sum == sum(v[0] for v in fc) and m_sum == sum(v[1] for v in fc)

    # the ZO step: PROBE = forward + loss + PRNG + perturbation, APPLY = PRNG + update
    def part(name: str) -> tuple[int, int]:  # "the rest" of the model may be negative
        m = re.search(rf"^  {re.escape(name)}\s+(-?[\d,]+)\s+(-?[\d,]+)", out, re.M)
        assert m, f"no {name!r} row in\n{out}"
        return _n(m.group(1)), _n(m.group(2))

    for i in range(2):  # scalar, Helium
        probe = part("PROBE")[i]
        parts = ("forward passes (model)", "loss (model)", "PRNG model: q scales + n x rows")
        assert (
            probe
            == sum(part("  " + p)[i] for p in parts) + part("  the rest (perturbation, batch)")[i]
        )
        assert (
            part("APPLY")[i]
            == part("  PRNG model (chunk samples)")[i] + part("  the rest (update)")[i]
        )
    s_fwd, m_fwd = part("  forward passes (model)")
    assert s_fwd > 2 * m_fwd
    # Philox runs four blocks per call in Helium lanes: fewer instructions than the scalar
    s_prng, m_prng = part("  PRNG model (chunk samples)")
    assert 0 < m_prng < s_prng
    # the measured split (the QEMU plugin): its total is the tick bracket's to a few
    # instructions, in both images and both steps, and names the perturbation loop
    splits = re.findall(
        r"^  (PROBE|APPLY) per function \(measured; plugin total ([\d,]+), "
        r"tick bracket ([\d,]+)\)",
        out,
        re.M,
    )
    assert len(splits) == 4, out
    for _, plugin, ticks in splits:
        assert abs(_n(plugin) - _n(ticks)) <= 16, (plugin, ticks)
    # (from the stream, or from the seed's buffered words when the scratch holds them)
    assert re.search(r"^    hb_zo_perturb_(run|words)\s+[\d,]+\s+[\d.]+%", out, re.M)
    assert "losses and weights CRCs equal in both images" in out


def test_a_model_it_does_not_know_is_refused_in_one_line():
    done = _run("--models", "mlp,resnet")
    assert done.returncode == 2
    assert "--models takes a comma list of mlp, cnn, mobilenet" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_kernels_meet_issue_25s_ratios_to_cmsis_nn_on_the_anchor_shapes():
    done = _run("--kernels", "--no-split", "--runs", "1")
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-2000:]
    assert "MISMATCH" not in out  # the scalar and the Helium image give the same bytes
    ratio = {
        m.group(1).strip(): float(m.group(2))
        for m in re.finditer(
            r"^(\S.{33})\s+[\d,]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)x", out, re.M
        )
    }
    pointwise = {k: v for k, v in ratio.items() if k.startswith("conv 1x1 ")}
    assert set(ratio) - set(pointwise) == {
        "conv 3x3 16x16x16 -> 32, same",
        "depthwise 3x3 16x16x64, same",
        "fully connected 256 -> 128",
    }, out
    # the goals: conv 3x3 <= 1.3x, depthwise <= 1.5x, FC <= 1.0x CMSIS-NN's instructions
    assert ratio["conv 3x3 16x16x16 -> 32, same"] <= 1.3, out
    assert ratio["depthwise 3x3 16x16x64, same"] <= 1.5, out
    assert ratio["fully connected 256 -> 128"] <= 1.0, out
    # MobileNetV2 a0.35 32x32's 1x1 convs (and the 16x16x16 -> 32 one), each against
    # CMSIS-NN's instructions measured by device_fw/bench/cmsis_anchor: issue 25's <= 1.0x,
    # with the margin reached (the worst 0.97x), and CMSIS-NN's output bytes (its checksum:
    # no MISMATCH above)
    assert len(pointwise) == 13, out
    for name, r in pointwise.items():
        assert r <= 0.98, (name, r, out)
    # the large maps gain most: their per-group cost (four outputs per dot product) is lower
    assert ratio["conv 1x1 16x16x16 -> 32"] <= 0.8, out


def test_mobilenets_probe_is_near_its_floor_with_every_perturbation():
    done = _run("--probe-table", "--probe-model", "MobileNetV2 a0.35 32x32", "--no-split")
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-2000:]
    assert "LOSSES DIFFER" not in out  # with the scratch and without: the same losses
    rows = {
        m.group(1).strip(): (_n(m.group(3)), _n(m.group(4)), float(m.group(5)))
        for m in re.finditer(
            rf"^  MobileNetV2 a0.35 32x32, (\S.*?)\s+2\s+4\s+{NUM}\s+{NUM}\s+[\d.]+x\s+{NUM}"
            rf"\s+([\d.]+)x",
            out,
            re.M,
        )
    }
    ratio = {k: probe / floor for k, (probe, floor, _) in rows.items()}
    for k, (probe, floor, printed) in rows.items():
        assert abs(probe / floor - printed) < 0.006, (k, probe, floor, printed)
    assert set(ratio) == {"rademacher", "uniform", "uniform + pool 1280", "gaussian"}, out
    # issue 25's targets: <= 1.2x the floor (1.5x with Gaussian samples), as reached at
    # 5ba9572: 1.09, 1.17, 1.19 and 1.38
    assert ratio["rademacher"] <= 1.12, out
    assert ratio["uniform"] <= 1.18, out
    assert ratio["uniform + pool 1280"] <= 1.2, out
    assert ratio["gaussian"] <= 1.42, out
