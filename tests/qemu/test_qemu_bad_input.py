"""Bad input to --qemu, each one line naming the cause and the fix: QEMU or the cross compiler
missing (with the apt command), an ELF for another machine or no ELF at all, a firmware that
never says HELLO (its UART tail and QEMU's stderr), a UART port already taken."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from hilbench.launch.qemu import APT_CROSS, APT_QEMU
from hilbench.launch.sil import sil_binary
from tests.cli_helpers import ROOT


def _run(*args: str, path: str | None = None, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, **env}
    if path is not None:
        environ["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "hilbench", "run", "--qemu", "--budget", "80", "--no-live", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env=environ,
    )


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("hilbench: error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return errors[0]


def _path_with(tmp_path: Path, *tools: str) -> str:
    """A PATH holding only these tools (links to the real ones)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    return str(bin_dir)


def test_qemu_missing_names_the_apt_command(tmp_path, an547_elf):
    line = _one_line_error(
        _run("--fw", str(an547_elf), "--trace", str(tmp_path / "t.h5"), path=_path_with(tmp_path))
    )
    assert "qemu-system-arm, which is not installed" in line and APT_QEMU in line


def test_pytest_qemu_without_qemu_is_a_usage_error(tmp_path, an547_elf):
    (tmp_path / "test_x.py").write_text("def test_x(device):\n    pass\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--qemu",
            f"--fw={an547_elf}",
            str(tmp_path / "test_x.py"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": _path_with(tmp_path)},
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error
    assert "qemu-system-arm, which is not installed" in proc.stderr and APT_QEMU in proc.stderr


def test_cross_compiler_missing_names_the_apt_command(tmp_path):
    line = _one_line_error(
        _run(
            "--trace", str(tmp_path / "t.h5"), path=_path_with(tmp_path, "make", "qemu-system-arm")
        )
    )
    assert "arm-none-eabi-gcc, which is not installed" in line and APT_CROSS in line
    assert "--fw" in line


def test_an_elf_for_another_machine_or_no_elf(tmp_path):
    line = _one_line_error(_run("--fw", str(sil_binary()), "--trace", str(tmp_path / "t.h5")))
    assert "is an ELF for" in line and "not for the Cortex-M55 (32-bit ARM)" in line
    assert "make -C device_fw an547" in line
    text = tmp_path / "notes.txt"
    text.write_text("not firmware\n")
    line = _one_line_error(_run("--fw", str(text), "--trace", str(tmp_path / "t.h5")))
    assert f"--fw {text} is not an ELF file" in line


SILENT = r"""
#include <stdint.h>
#define UART0 0x59303000u
#define R(a) (*(volatile uint32_t *)(a))
void reset(void);
extern uint32_t stack_top;
__attribute__((section(".vectors"), used)) const void *vectors[2] = {&stack_top, reset};
void reset(void) {
    R(UART0 + 0x10) = 217;
    R(UART0 + 0x8) = 1;
    for (const char *s = "silent booting\n"; *s; s++) {
        while (R(UART0 + 4) & 1) {}
        R(UART0) = (uint32_t)*s;
    }
    for (;;) __asm__ volatile("wfi");
}
"""
SILENT_LD = """
MEMORY { ITCM (rx) : ORIGIN = 0, LENGTH = 512K  DTCM (rw) : ORIGIN = 0x20000000, LENGTH = 512K }
ENTRY(reset)
SECTIONS { .text : { KEEP(*(.vectors)) *(.text*) *(.rodata*) } > ITCM
           stack_top = ORIGIN(DTCM) + LENGTH(DTCM); }
"""


def test_a_firmware_that_never_says_hello(tmp_path):
    """An M55 program that boots, prints on the UART and then ignores it."""
    (tmp_path / "silent.c").write_text(SILENT)
    (tmp_path / "silent.ld").write_text(SILENT_LD)
    elf = tmp_path / "silent.elf"
    subprocess.run(
        [
            "arm-none-eabi-gcc",
            "-mcpu=cortex-m55",
            "-mthumb",
            "-O1",
            "-nostdlib",
            "-Wl,--no-warn-rwx-segments",
            "-T",
            str(tmp_path / "silent.ld"),
            "-o",
            str(elf),
            str(tmp_path / "silent.c"),
        ],
        check=True,
        capture_output=True,
    )
    line = _one_line_error(_run("--fw", str(elf), "--trace", str(tmp_path / "t.h5")))
    assert "to HELLO" in line and "no answer" in line
    assert "UART tail: " + b"silent booting\n".hex(" ") in line  # what the UART did send
    assert "QEMU is still running" in line and "its stderr:" in line


def test_a_port_already_taken(tmp_path, an547_elf):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        line = _one_line_error(
            _run(
                "--fw",
                str(an547_elf),
                "--trace",
                str(tmp_path / "t.h5"),
                HILBENCH_QEMU_PORT=str(port),
            )
        )
    assert f"QEMU cannot listen on 127.0.0.1:{port} for the UART: the port is taken" in line
    assert "HILBENCH_QEMU_PORT" in line
    line = _one_line_error(_run("--fw", str(an547_elf), HILBENCH_QEMU_PORT="http"))
    assert "HILBENCH_QEMU_PORT='http' is not a TCP port" in line
