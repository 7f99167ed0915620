"""`hilbench flash`: the tool is found (STM32CubeProgrammer first, then OpenOCD; PATH or the
HILBENCH_* variables), the command line each gets, and the refusals in one line: no tool, a
variable naming no program, an image linked for RAM, a tool that fails. Neither tool is
installed here: STAND-IN programs with the tools' names record their arguments and answer as
told (they write nothing anywhere)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.board.conftest import ROOT

STANDIN = """#!{python}
import json, sys
with open({log!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
print("stand-in: {last}")
sys.exit({code})
"""


def standin(directory: Path, name: str, *, code: int = 0, last: str = "Download verified") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    log = directory / "calls.jsonl"
    path.write_text(STANDIN.format(python=sys.executable, log=str(log), last=last, code=code))
    path.chmod(0o755)
    return path


def calls(directory: Path) -> list[list[str]]:
    return [json.loads(line) for line in (directory / "calls.jsonl").read_text().splitlines()]


def hilbench(*args: str, path: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HILBENCH_")}
    environ.update(PATH=path, **env)
    return subprocess.run(
        [sys.executable, "-m", "hilbench", *args],
        capture_output=True, text=True, cwd=ROOT, env=environ, timeout=120,
    )  # fmt: skip


def one_line_error(done: subprocess.CompletedProcess) -> str:
    err = done.stderr.strip()
    assert done.returncode == 2 and err.startswith("hilbench: error: ") and "\n" not in err, err
    return err


@pytest.fixture
def image(tmp_path) -> Path:
    path = tmp_path / "boot-signed.bin"
    path.write_bytes(b"\x53\x54\x4d\x32" + bytes(60))
    return path


def test_no_tool_is_one_line_naming_both(image, tmp_path):
    err = one_line_error(hilbench("flash", str(image), path=str(tmp_path / "empty")))
    assert "no tool to write the external flash" in err
    assert "STM32_Programmer_CLI" in err and "openocd" in err and "HILBENCH_CUBEPROG" in err


def test_a_variable_naming_no_program(image, tmp_path):
    done = hilbench("flash", str(image), path="", HILBENCH_CUBEPROG=str(tmp_path / "nope"))
    assert "HILBENCH_CUBEPROG" in one_line_error(done) and "not an executable" in done.stderr


def test_our_ram_linked_firmware_is_refused(stm32n6_elf, tmp_path):
    bin_dir = tmp_path / "bin"
    standin(bin_dir, "openocd")
    err = one_line_error(hilbench("flash", str(stm32n6_elf), path=str(bin_dir)))
    assert "linked for RAM (development boot at 0x34000400)" in err and "hilbench load" in err
    assert "only at 0x34180400" in err
    assert not (bin_dir / "calls.jsonl").exists()  # the tool never ran


def test_cubeprogrammer_gets_the_probe_the_loader_and_the_address(image, tmp_path):
    bin_dir = tmp_path / "cubeprog" / "bin"
    tool = standin(bin_dir, "STM32_Programmer_CLI")
    (bin_dir / "ExternalLoader").mkdir()
    loader = bin_dir / "ExternalLoader" / "MX66UW1G45G_STM32N6570-DK.stldr"
    loader.write_bytes(b"")
    standin(tmp_path / "other", "openocd")  # CubeProgrammer comes first
    done = hilbench(
        "flash", str(image), "--probe", "003A00293433510F37363934",
        path=f"{bin_dir}{os.pathsep}{tmp_path / 'other'}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "external flash written and verified: stand-in: Download verified",
        "to boot from it: set BOOT1 low (flash boot), then power-cycle the board",
    ]
    assert calls(bin_dir) == [
        ["-c", "port=SWD", "mode=HOTPLUG", "sn=003A00293433510F37363934", "-el", str(loader),
         "-w", str(image), "0x70000000", "-v"],
    ]  # fmt: skip
    assert tool.exists()


def test_openocd_command_and_a_failing_tool(image, tmp_path):
    bin_dir = tmp_path / "bin"
    standin(bin_dir, "openocd", code=1, last="Error: no flash bank found for address 0x70000000")
    done = hilbench("flash", str(image), "--tool", "openocd", "--probe", "ABC", path=str(bin_dir))
    err = one_line_error(done)
    assert "openocd failed writing the flash (exit 1)" in err and "no flash bank found" in err
    assert "run it by hand" in err
    assert calls(bin_dir) == [
        ["-f", "interface/stlink-dap.cfg", "-f", "target/stm32n6x.cfg",
         "-c", "adapter serial ABC", "-c", f"program {image} 0x70000000 verify exit"],
    ]  # fmt: skip


def test_cubeprogrammer_without_a_loader_to_choose(image, tmp_path):
    bin_dir = tmp_path / "bin"
    standin(bin_dir, "STM32_Programmer_CLI")
    err = one_line_error(hilbench("flash", str(image), path=str(bin_dir)))
    assert "external loader" in err and "--loader PATH.stldr" in err
