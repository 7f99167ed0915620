"""``hilbench doctor [--json] [--trace-dir DIR]``: what this machine has for each backend, and
the line that installs what is missing.

Each check is one row: the backend it serves, what was looked for, what was found (a version,
a path, a count) and, when it is missing or broken, the command that fixes it. Nothing is
changed; a board or probe is only listed, never opened.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

#: The Debian packages the source install's tools/install-deps installs, by what needs them.
APT = "sudo apt-get install"


@dataclass(frozen=True)
class Check:
    """One row of the doctor's answer."""

    backend: str  # emulate, sil, qemu, board, farm, data, disk, report
    what: str
    ok: bool
    found: str  # what was found (a version, a path), or why it is missing
    fix: str = ""  # the command that installs or fixes it, when not ok

    def line(self) -> str:
        mark = "ok  " if self.ok else "MISS"
        text = f"  {mark} {self.what}: {self.found}"
        return text + (f"\n         fix: {self.fix}" if self.fix and not self.ok else "")


def _package(name: str, backend: str, fix: str, *, dist: str | None = None) -> Check:
    try:
        version = importlib.metadata.version(dist or name)
    except importlib.metadata.PackageNotFoundError:
        return Check(backend, f"Python package {name}", False, "not installed", fix)
    return Check(backend, f"Python package {name}", True, version)


def _tool(command: str, backend: str, fix: str, *, what: str = "") -> Check:
    path = shutil.which(command)
    label = what or command
    if path is None:
        return Check(backend, label, False, "not on PATH", fix)
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=20
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError) as exc:
        return Check(backend, label, False, f"{path} does not run ({exc})", fix)
    return Check(backend, label, True, f"{out[0].strip() if out else '?'} ({path})")


def _native() -> Check:
    try:
        from hilbench.npu import native

        isa = native.active_isa()
    except Exception as exc:  # an ImportError of the compiled engine, or its CPU check
        return Check(
            "emulate",
            "the compiled NPU engine",
            False,
            f"cannot load ({str(exc).splitlines()[0][:120]})",
            "python setup.py build_ext --inplace (a source checkout), or pip install -e .",
        )
    return Check("emulate", "the compiled NPU engine", True, f"kernel table {isa}")


def _framing() -> Check:
    from hilbench.protocol import frames

    what = "the compiled framing (host per-step frames)"
    if frames.NATIVE_ERROR is not None:
        return Check(
            "emulate",
            what,
            False,
            f"cannot load ({frames.NATIVE_ERROR.splitlines()[0][:120]}): the Python codec runs",
            "python setup.py build_ext --inplace (a source checkout), or pip install -e .",
        )
    return Check("emulate", what, True, "device_fw/core/frame.c, built for this host")


def _qemu() -> Check:
    from hilbench.errors import HilbenchError
    from hilbench.launch.qemu import check_qemu

    fix = f"{APT} qemu-system-arm"
    try:
        path = check_qemu()
    except HilbenchError as exc:
        return Check("qemu", "qemu-system-arm (mps3-an547)", False, str(exc).split(". ")[0], fix)
    version = subprocess.run(
        [path, "--version"], capture_output=True, text=True, timeout=20
    ).stdout.splitlines()
    return Check(
        "qemu",
        "qemu-system-arm (mps3-an547)",
        True,
        f"{version[0].strip() if version else '?'} ({path})",
    )


def _fashion() -> Check:
    from hilbench.data import fashion

    folder = fashion.folder()
    files = sorted(p.name for p in folder.glob("*")) if folder.is_dir() else []
    if not files:
        return Check(
            "data",
            "Fashion-MNIST (vision models)",
            False,
            f"no files in {folder}",
            f"{APT} dataset-fashion-mnist",
        )
    return Check("data", "Fashion-MNIST (vision models)", True, f"{len(files)} files in {folder}")


def _probes() -> list[Check]:
    fix = "plug the STM32N6570-DK's ST-LINK in (USB CN6); docs/board.md"
    check = _package("pyocd", "board", "pip install pyocd")
    if not check.ok:
        return [check]
    from hilbench.errors import HilbenchError

    try:
        from hilbench.board.pyocd_target import list_probes

        probes = list_probes()
    except (HilbenchError, ImportError, OSError) as exc:
        return [check, Check("board", "debug probes", False, str(exc)[:200], fix)]
    if not probes:
        return [check, Check("board", "debug probes", False, "none attached", fix)]
    names = ", ".join(f"{p.unique_id} ({p.description})" for p in probes)
    return [check, Check("board", "debug probes", True, f"{len(probes)}: {names}")]


def _ports() -> list[Check]:
    from hilbench.board.ports import DIALOUT_FIX, list_ports

    try:
        ports = list_ports()
    except OSError as exc:
        return [Check("board", "serial ports", False, f"cannot list them ({exc})", "")]
    if not ports:
        return [Check("board", "serial ports", False, "none", "plug the board in (USB)")]
    out = []
    for port in ports:
        kind = f", {port.stlink}" if port.stlink else ""
        usable = os.access(port.device, os.R_OK | os.W_OK)
        found = f"{port.description or 'serial port'}{kind}; " + (
            "readable and writable" if usable else "no permission to open"
        )
        out.append(Check("board", f"serial port {port.device}", usable, found, DIALOUT_FIX))
    return out


def _farm() -> list[Check]:
    from hilbench.farm.spec import ENV_COORDINATOR

    check = _package("labgrid", "farm", "pip install 'hilbench[farm]'")
    coordinator = os.environ.get(ENV_COORDINATOR, "")
    return [
        check,
        Check(
            "farm",
            f"${ENV_COORDINATOR}",
            bool(coordinator),
            coordinator or "not set (labgrid's default 127.0.0.1:20408 is used)",
            f"export {ENV_COORDINATOR}=HOST:PORT (the farm's coordinator)",
        ),
    ]


def cache_size(root: Path) -> tuple[int, int]:
    """(files, bytes) under the cache folder (0, 0 when it does not exist)."""
    files = size = 0
    if root.is_dir():
        for p in root.rglob("*"):
            if p.is_file():
                files += 1
                size += p.stat().st_size
    return files, size


def _writable(folder: Path) -> tuple[Path, bool]:
    """The folder, or its nearest existing parent, and whether hilbench may write there."""
    here = folder
    while not here.exists() and here != here.parent:
        here = here.parent
    return here, os.access(here, os.W_OK | os.X_OK)


def _cache() -> Check:
    from hilbench.data import cache

    root = cache.root()
    files, size = cache_size(root)
    where, writable = _writable(root)
    found = f"{root}: {files} files, {_mib(size)}; " + (
        "writable" if writable else f"not writable ({where})"
    )
    return Check(
        "data",
        "the cache ($HILBENCH_CACHE)",
        writable,
        found,
        "set HILBENCH_CACHE to a writable folder",
    )


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


#: Below this much free space where traces go, the doctor warns (a long run writes ~60 B a step).
LOW_DISK = 1 << 30


def _disk(trace_dir: Path) -> Check:
    where, writable = _writable(trace_dir)
    free = shutil.disk_usage(where).free
    ok = writable and free >= LOW_DISK
    found = f"{trace_dir}: {free / 2**30:,.1f} GiB free" + (
        "" if writable else f"; {where} is not writable"
    )
    return Check(
        "disk",
        "free space where traces go",
        ok,
        found,
        "free some space, or write traces elsewhere (--trace / --trace-dir)",
    )


def checks(trace_dir: Path) -> list[Check]:
    py = sys.version_info
    rows = [
        Check(
            "emulate",
            "Python",
            py >= (3, 11),
            f"{platform.python_version()} ({sys.executable})",
            "install Python 3.11 or later",
        ),
        _package("hilbench", "emulate", "pip install -e . (in the checkout)"),
    ]
    for name, dist in (("numpy", None), ("h5py", None), ("rich", None), ("serial", "pyserial")):
        rows.append(_package(name, "emulate", "pip install -e .", dist=dist))
    rows.append(_native())
    rows.append(_framing())
    rows.append(_tool("make", "sil", f"{APT} make"))
    rows.append(_tool("gcc", "sil", f"{APT} gcc"))
    rows.append(_tool("clang", "sil", f"{APT} clang  (the fuzzers and sanitizers only)"))
    rows.append(
        _tool("arm-none-eabi-gcc", "qemu", f"{APT} gcc-arm-none-eabi libnewlib-arm-none-eabi")
    )
    rows.append(_qemu())
    rows += _probes()
    rows += _ports()
    rows += _farm()
    rows.append(_fashion())
    rows.append(_cache())
    rows.append(_package("matplotlib", "report", "pip install 'hilbench[report]'"))
    rows.append(_disk(trace_dir))
    return rows


#: What each section of the answer serves.
SECTIONS = {
    "emulate": "--emulate (the twin; every backend needs these)",
    "sil": "--sil (the firmware built for this host)",
    "qemu": "--qemu (the firmware on a Cortex-M55 under QEMU; also builds a board's firmware)",
    "board": "--board PORT (a physical STM32N6570-DK)",
    "farm": "--board labgrid:PLACE (a farm's boards)",
    "data": "data sets and the cache",
    "report": "report --plot / --html",
    "disk": "traces",
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor", help="what this machine has for each backend, and how to install the rest"
    )
    p.add_argument("--json", action="store_true", help="one JSON list of checks")
    p.add_argument(
        "--trace-dir",
        type=Path,
        default=Path("traces"),
        metavar="DIR",
        help="where traces go, for the free-space check (default ./traces)",
    )
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    rows = checks(args.trace_dir)
    if args.json:
        print(json.dumps([asdict(r) for r in rows]))
        return 0
    for section, meaning in SECTIONS.items():
        mine = [r for r in rows if r.backend == section]
        if not mine:
            continue
        ready = all(r.ok for r in mine)
        print(f"{section}: {meaning}{'' if ready else ' — something is missing'}")
        for r in mine:
            print(r.line())
    missing = [r for r in rows if not r.ok]
    print(
        f"{len(rows) - len(missing)} of {len(rows)} checks ok"
        + (f"; {len(missing)} missing (each with its fix above)" if missing else ""),
        flush=True,
    )
    return 0
