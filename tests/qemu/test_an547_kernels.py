"""Both kernel variants of the an547 port, each built fresh and proven on the Cortex-M55 under
QEMU: the C unit tests on the golden vectors (test_nn: every op against TFLM's outputs;
test_model, test_transcripts: perturbed forward passes and whole sessions) pass with the Helium
(MVE) kernels and with the scalar C, and the Helium build also runs test_nn_mve (the Helium
kernels against the scalar ones on random and edge geometries). The images differ where they
should: the default image's int8 kernels are made of MVE instructions, the scalar one's of
none."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.cli_helpers import ROOT

KERNELS = (
    "hb_nn_fully_connected_s8",
    "hb_nn_conv2d_s8",
    "hb_nn_depthwise_conv2d_s8",
    "hb_zo_perturb_pool_cols",  # a pool's depthwise filter into the PROBE's copy
)
# MVE instructions (a q register operand, or the tail-predicated loop's WLSTP/LETP)
MVE = re.compile(r"\b(v\w+\.[su]?(8|16|32)\s.*\bq\d|wlstp|letp)\b")


def _make(build, *args: str) -> str:
    done = subprocess.run(
        ["make", "-C", str(ROOT / "device_fw"), f"BUILD={build}", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    return out


def _mve_lines(elf, symbol: str) -> list[str]:
    done = subprocess.run(
        [
            "arm-none-eabi-objdump",
            "-d",
            "-m",
            "armv8.1-m.main",
            f"--disassemble={symbol}",
            str(elf),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert f"<{symbol}>:" in done.stdout, f"{symbol} is not in {elf}"
    return [ln for ln in done.stdout.splitlines() if MVE.search(ln)]


@pytest.mark.parametrize("nn", ["mve", "scalar"])
def test_each_kernel_variant_passes_the_c_tests_on_the_m55(tmp_path, nn):
    out = _make(tmp_path, "an547", "an547-test", f"AN547_NN={nn}")
    assert not [ln for ln in out.splitlines() if "warning:" in ln.lower()]
    results = dict(re.findall(r"^(test_\w+): (\d+) checks, 0 failed$", out, re.M))
    failed = re.findall(r"^test_\w+: \d+ checks, [1-9]\d* failed$", out, re.M)
    assert not failed, failed
    for name in ("test_nn", "test_model", "test_transcripts", "test_device_model"):
        assert int(results.get(name, 0)) > 0, f"{name} did not run on the {nn} build"
    assert ("test_nn_mve" in results) == (nn == "mve")
    if nn == "mve":
        assert int(results["test_nn_mve"]) > 50_000
        # the few-pixel pointwise CONV_2D with its rows and biases in place (no row calls)
        # was among the cases, against the scalar reference
        m = re.search(r"\((\d+) pointwise ones read in place\)", out)
        assert m and int(m.group(1)) >= 20, out[-2000:]
    n = int(re.search(r"all (\d+) C test programs passed on the Cortex-M55", out).group(1))
    assert n == len(results)

    sub = "an547" if nn == "mve" else "an547-scalar"
    elf = tmp_path / sub / "hilbench-an547.elf"
    for symbol in KERNELS:
        lines = _mve_lines(elf, symbol)
        if nn == "mve":
            assert len(lines) >= 5, f"{symbol} of the Helium image has no MVE instructions"
        else:
            assert not lines, f"{symbol} of the scalar image uses MVE: {lines[:3]}"


def test_a_variant_that_does_not_exist_is_refused_in_one_line(tmp_path):
    done = subprocess.run(
        ["make", "-C", str(ROOT / "device_fw"), f"BUILD={tmp_path}", "an547", "AN547_NN=neon"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "AN547_NN=neon is not a kernel variant" in done.stderr
    assert "AN547_NN=mve" in done.stderr and "AN547_NN=scalar" in done.stderr
