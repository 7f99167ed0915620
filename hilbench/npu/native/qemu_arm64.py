"""Build the native engine for ARM64 Linux and test it under qemu-aarch64 (user mode).

    python -m hilbench.npu.native.qemu_arm64 [--sysroot DIR] [--oracle] [-- PYTEST-ARGS]
    python -m hilbench.npu.native.qemu_arm64 --prepare     # step 1 only (tools/install-deps)

For a machine without an ARM64 CPU (Debian/Ubuntu x86-64 with ``gcc-aarch64-linux-gnu``
and ``qemu-user``, and ``dpkg --add-architecture arm64 && apt-get update`` done once):

1. a sysroot (``--sysroot``, default ``~/.cache/hilbench/arm64``): Debian's arm64 Python
   3.11 and the C libraries it needs, unpacked from ``apt-get download`` (nothing is
   installed on the host), plus manylinux aarch64 wheels of numpy (the host's version),
   pytest and threadpoolctl from PyPI;
2. the engine cross-compiled from the same sources and flags as ``pip install``
   (``sources.py``) into ``_engine.cpython-311-aarch64-linux-gnu.so`` next to the host's;
3. ``tests/npu/test_native_isa.py`` run by that Python under qemu-aarch64, twice: with
   ``-cpu max`` (it has the dot-product instructions: the ``neondot`` and ``portable``
   tables both run and are compared with the numpy reference path) and with
   ``-cpu cortex-a72`` (no dot products: ``neondot`` must be reported as not runnable,
   ``portable`` runs). ``--oracle`` runs the oracle's 1,350 single-op cases (its generators
   and seeds) and 400 random FC layers instead of the default subset (2-4 minutes per CPU
   model on 2 cores).

``--prepare`` does step 1 and nothing else: ``tools/install-deps`` runs it, so that the
test suite (``tests/npu/test_native_arm64.py``, which does steps 2 and 3) downloads nothing.

TFLM has no ARM64 wheel, so the ARM64 tables are compared with the numpy path, which the
x86-64 oracle tests compare with TFLM byte for byte on the same cases.
"""

from __future__ import annotations

import argparse
import os
import runpy
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
PY = "python3.11"
CROSS = "aarch64-linux-gnu-gcc"
# Debian (bookworm) arm64 packages: the interpreter, its standard library and what it links
DEBS = (
    "python3.11-minimal",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "libpython3.11-dev",
    "libpython3.11",
    "libexpat1",
    "zlib1g",
    "libc6",
    "libssl3",
    "libbz2-1.0",
    "libcrypt1",
    "libdb5.3",
    "libffi8",
    "liblzma5",
    "libncursesw6",
    "libnsl2",
    "libreadline8",
    "libsqlite3-0",
    "libtinfo6",
    "libtirpc3",
    "libuuid1",
    "libgcc-s1",
    "libstdc++6",
    "libgssapi-krb5-2",
    "libkrb5-3",
    "libk5crypto3",
    "libkrb5support0",
    "libcom-err2",
    "libkeyutils1",
)
DEFAULT_ROOT = Path.home() / ".cache/hilbench/arm64"
WHEELS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments", "threadpoolctl")


class SetupError(Exception):
    """A missing tool or step, with the fix."""


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


def _need(tool: str, package: str) -> None:
    if shutil.which(tool) is None:
        raise SetupError(f"{tool} not found; install it: apt-get install {package}")


def prepared(root: Path) -> Path | None:
    """The sysroot's site dir if ``sysroot`` has run (nothing to download), else None."""
    site = root / "site"
    return site if (root / "usr/bin" / PY).exists() and (site / "numpy").exists() else None


def sysroot(root: Path) -> Path:
    """Unpack the arm64 Python and its libraries into root (once); return its site dir."""
    site = root / "site"
    if prepared(root):
        return site
    _need("apt-get", "apt")
    _need("dpkg", "dpkg")
    foreign = subprocess.run(
        ["dpkg", "--print-foreign-architectures"], capture_output=True, text=True, check=True
    ).stdout.split()
    if "arm64" not in foreign:
        raise SetupError(
            "dpkg does not list arm64 packages; run once (as root): "
            "dpkg --add-architecture arm64 && apt-get update"
        )
    debs = root / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    _run(["apt-get", "download", *(f"{p}:arm64" for p in DEBS)], cwd=debs)
    for deb in sorted(debs.glob("*.deb")):
        _run(["dpkg", "-x", str(deb), str(root)])
    wheels = root / "wheels"
    import numpy

    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    _run([*pip, "-d", str(wheels), *WHEELS])
    plat = ["manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_28_aarch64"]
    _run(
        [*pip, "-d", str(wheels), "--python-version", "3.11", "--implementation", "cp"]
        + [a for p in plat for a in ("--platform", p)]
        + [f"numpy=={numpy.__version__}"]
    )
    site.mkdir(exist_ok=True)
    for whl in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(whl) as z:
            z.extractall(site)
    return site


def build(root: Path) -> Path:
    """Cross-compile the engine next to the host's build; return the module's path."""
    _need(CROSS, "gcc-aarch64-linux-gnu")
    src = runpy.run_path(str(HERE / "sources.py"))
    out = HERE / "_engine.cpython-311-aarch64-linux-gnu.so"
    inc = [f"-I{REPO / d}" for d in src["INCLUDE_DIRS"]]
    inc += [f"-I{root}/usr/include/{PY}", f"-I{root}/usr/include"]
    cmd = [CROSS, *src["CFLAGS"], "-Wextra", "-Werror", "-fPIC", "-shared", *inc, "-o", str(out)]
    _run(cmd + [str(HERE / s) for s in src["SOURCES"]])
    return out


def test(root: Path, site: Path, cpu: str, oracle: bool, args: list[str]) -> int:
    """test_native_isa.py under qemu-aarch64 with the given CPU model; pytest's status."""
    _need("qemu-aarch64", "qemu-user")
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO}{os.pathsep}{site}",
        "QEMU_CPU": cpu,
        "HILBENCH_NATIVE_ISA_CASES": "oracle" if oracle else "",
    }
    cmd = ["qemu-aarch64", "-L", str(root), str(root / "usr/bin" / PY), "-m", "pytest"]
    cmd += ["-q", "-rs", "-p", "no:cacheprovider", "-p", "no:hilbench"]
    cmd += ["tests/npu/test_native_isa.py", *args]
    print(f"--- qemu-aarch64 -cpu {cpu}: {' '.join(cmd[5:])}", flush=True)
    return subprocess.run(cmd, cwd=REPO, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sysroot", type=Path, default=DEFAULT_ROOT)
    ap.add_argument("--oracle", action="store_true", help="all the oracle's cases")
    ap.add_argument("--prepare", action="store_true", help="only unpack the sysroot")
    ap.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    a = ap.parse_args(argv)
    if sysconfig.get_platform() != "linux-x86_64":
        print("qemu_arm64: for x86-64 Linux hosts (on ARM64, pip install -e . builds and "
              "pytest runs natively)", file=sys.stderr)  # fmt: skip
        return 2
    try:
        site = sysroot(a.sysroot.expanduser())
        if a.prepare:
            print(f"qemu_arm64: arm64 sysroot ready in {a.sysroot.expanduser()}", flush=True)
            return 0
        print(f"built {build(a.sysroot.expanduser())}", flush=True)
        status = 0
        for cpu in ("max", "cortex-a72"):
            status |= test(a.sysroot.expanduser(), site, cpu, a.oracle, a.pytest_args)
    except SetupError as e:
        print(f"qemu_arm64: {e}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as e:
        print(f"qemu_arm64: {' '.join(map(str, e.cmd))[:200]} failed ({e.returncode})",
              file=sys.stderr)  # fmt: skip
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
