"""The ARM64 kernel tables on this x86-64 host: the engine cross-compiled for aarch64 Linux
(the same sources and flags as ``pip install``, with ``-Wextra -Werror``) and
``test_native_isa.py`` run by Debian's arm64 Python under qemu-aarch64 (user mode), as
``python -m hilbench.npu.native.qemu_arm64`` does by hand: with ``-cpu max`` the dot-product
table (``neondot``) and the portable C both run every case and equal the numpy reference
path; with ``-cpu cortex-a72`` (no dot products) ``neondot`` is reported as not runnable and
the portable C still runs. ``tools/install-deps`` installs the cross compiler and
qemu-user and unpacks the arm64 sysroot (``--prepare``), so nothing downloads here."""

from __future__ import annotations

import re
import subprocess
import sysconfig
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hilbench.npu import native
from hilbench.npu.native import qemu_arm64

pytestmark = pytest.mark.skipif(
    sysconfig.get_platform() != "linux-x86_64",
    reason="cross-built for ARM64 from x86-64 Linux only (on ARM64 the tables run natively)",
)
ARM64_ISAS = ("neondot", "portable")
# a test id's kernel table: the last parameter (the outermost parametrize)
_ISA = re.compile(
    r"[\[-](" + "|".join(map(re.escape, sorted(native.KNOWN_ISAS, key=len, reverse=True))) + r")\]$"
)


def _outcomes(junit: Path) -> dict[str, dict[str, str]]:
    """{isa: {test id: 'passed' | 'failed' | 'skipped: <message>'}} from a junit report."""
    out: dict[str, dict[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        m = _ISA.search(case.get("name", ""))
        assert m, f"a test id without a kernel table: {case.get('name')}"
        verdict = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                verdict = "failed"
            elif child.tag == "skipped":
                verdict = f"skipped: {child.get('message', '')}"
        out.setdefault(m.group(1), {})[case.get("name")] = verdict
    return out


@pytest.fixture(scope="module")
def sysroot() -> tuple[Path, Path]:
    """The arm64 sysroot and its site dir (tools/install-deps made them), the engine built."""
    root = qemu_arm64.DEFAULT_ROOT
    site = qemu_arm64.prepared(root)
    if site is None:
        pytest.fail(
            f"no arm64 sysroot in {root}; run tools/install-deps "
            "(or python -m hilbench.npu.native.qemu_arm64 --prepare)",
            pytrace=False,
        )
    try:
        qemu_arm64.build(root)
    except qemu_arm64.SetupError as e:
        pytest.fail(f"{e} (tools/install-deps installs it)", pytrace=False)
    except subprocess.CalledProcessError as e:
        pytest.fail(
            f"cross-compiling the engine for aarch64 failed ({e.returncode}; the compiler's "
            "messages are in the captured output); tools/install-deps installs "
            "gcc-aarch64-linux-gnu and libc6-dev-arm64-cross",
            pytrace=False,
        )
    return root, site


def _run(sysroot: tuple[Path, Path], cpu: str, tmp_path: Path) -> dict[str, dict[str, str]]:
    root, site = sysroot
    junit = tmp_path / f"arm64-{cpu}.xml"
    status = qemu_arm64.test(root, site, cpu, False, [f"--junitxml={junit}"])
    got = _outcomes(junit)
    bad = {i: [t for t, v in r.items() if v == "failed"] for i, r in got.items()}
    assert status == 0 and not any(bad.values()), f"qemu-aarch64 -cpu {cpu}: failed {bad}"
    return got


def _ran_all(got: dict[str, dict[str, str]], isa: str) -> int:
    verdicts = got.get(isa, {})
    assert verdicts and set(verdicts.values()) == {"passed"}, f"{isa}: {verdicts}"
    return len(verdicts)


def test_dot_product_cpu_runs_both_arm64_tables(sysroot, tmp_path):
    got = _run(sysroot, "max", tmp_path)
    # every case of both ARM64 tables ran and passed, the same cases for each
    assert _ran_all(got, "neondot") == _ran_all(got, "portable") >= 10
    assert {t.replace("neondot", "portable") for t in got["neondot"]} == set(got["portable"])
    # the x86 tables are reported as absent from an aarch64 build, not passed
    for isa in set(native.KNOWN_ISAS) - set(ARM64_ISAS):
        assert all("not in this build (aarch64)" in v for v in got[isa].values()), isa


def test_cpu_without_dot_products_reports_neondot_not_runnable(sysroot, tmp_path):
    got = _run(sysroot, "cortex-a72", tmp_path)
    assert _ran_all(got, "portable") >= 10
    assert got["neondot"] and all(
        v.startswith("skipped") and "does not run these kernels" in v
        for v in got["neondot"].values()
    ), got["neondot"]
