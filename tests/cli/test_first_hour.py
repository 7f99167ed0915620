"""A lab user's first hour (issue 14), as they meet it: the ``hilbench`` command in a
subprocess. Each test fails without its fix."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hilbench import __version__, session
from hilbench.backend.emulate import EmulatorBackend
from hilbench.config import RunConfig
from hilbench.console import NullView
from hilbench.link.pty_pair import PtyPair
from hilbench.trace import Trace, list_runs
from tests.cli_helpers import emulator_on_tcp

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["--budget", "80", "--no-live"]


def hilbench(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("HILBENCH_")}
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "hilbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=full,
    )


def one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


class StopAfter(NullView):
    def __init__(self, n: int) -> None:
        self.n = n

    def update(self, progress) -> None:
        if progress.step >= self.n:
            raise KeyboardInterrupt


# ---------------------------------------------------------------- lost work


def test_a_new_run_never_orphans_an_unfinished_one_and_resume_finds_it(tmp_path):
    path = tmp_path / "killed.h5"
    memory = EmulatorBackend(link="memory")
    base = RunConfig(trace=path, live=False, budget=400, scheduler="fixed:2", seed=3)
    with pytest.raises(KeyboardInterrupt):
        session.run(base, backend=memory, view=StopAfter(25))
    session.run(base.replace(seed=4), backend=EmulatorBackend(link="memory"))  # the API may
    steps = Trace.open(path, "0000").n_steps
    assert list_runs(path) == ["0000", "0001"]

    refused = hilbench("run", "--trace", str(path), *QUICK)
    one_line(
        refused,
        f"{path} holds run 0000, interrupted after {steps} steps ({4 * steps} of 400 forward "
        "passes); a new run would leave it unfinished",
        f"`hilbench run --resume {path}`",
    )
    assert list_runs(path) == ["0000", "0001"]  # nothing appended

    # --resume continues the unfinished run, though it is not the last one
    resumed = hilbench("run", "--resume", str(path), "--no-live")
    assert resumed.returncode == 0, resumed.stderr
    assert "(run 0000)" in resumed.stdout
    assert Trace.open(path, "0000").status == "complete"
    assert Trace.open(path, "0000").n_steps == 100
    again = hilbench("run", "--resume", str(path))
    one_line(again, "every run of", "0000 complete, 0001 complete", "nothing to resume")


def test_piping_a_run_into_head_does_not_end_it(tmp_path):
    path = tmp_path / "piped.h5"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hilbench", "run", "--budget", "1600", "--trace", str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = [proc.stdout.readline() for _ in range(2)]  # what `| head -2` reads
    proc.stdout.close()  # ... before it exits
    _, err = proc.communicate(timeout=120)
    assert lines[0].startswith("[hilbench] hilbench · mlp on digits")
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err
    trace = Trace.open(path)
    assert trace.status == "complete" and trace.forward_passes == 1600


# ---------------------------------------------------------------- hints


def test_a_mistyped_option_is_the_subcommands_line_with_a_suggestion():
    line = one_line(hilbench("run", "--budjet", "100"))
    assert line == (
        "hilbench run: error: unrecognized option --budjet (did you mean --budget?). "
        "see `hilbench run --help`"
    )
    one_line(hilbench("report", "--jsn", "x.h5"), "hilbench report:", "did you mean --json?")


def test_faults_that_let_nothing_through_are_named_not_the_firmware(tmp_path):
    proc = hilbench("run", "--link-faults", "drop=1.0", *QUICK, "--trace", str(tmp_path / "t.h5"))
    line = one_line(proc, "no answer", "the injected faults (--link-faults) damage 100% of frames")
    assert "0% of round trips get through" in line and "firmware" not in line


def serve(handler) -> tuple[socket.socket, str]:
    server = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            handler(conn)

    threading.Thread(target=accept, daemon=True).start()
    return server, f"socket://127.0.0.1:{server.getsockname()[1]}"


def test_an_echoing_port_is_called_a_loopback_not_a_firmware_to_reflash(tmp_path):
    def echo(conn: socket.socket) -> None:
        while data := conn.recv(4096):
            conn.sendall(data)

    server, url = serve(echo)
    try:
        proc = hilbench("run", "--board", url, *QUICK, "--trace", str(tmp_path / "t.h5"))
    finally:
        server.close()
    line = one_line(proc, "echoes what hilbench sends", "loopback", "list_ports")
    assert "reflash" not in line


def test_a_port_that_speaks_text_shows_the_text(tmp_path):
    def console(conn: socket.socket) -> None:
        while conn.recv(4096):
            conn.sendall(b"U-Boot 2024.01 ready\r\n=> ")

    server, url = serve(console)
    try:
        proc = hilbench("run", "--board", url, *QUICK, "--trace", str(tmp_path / "t.h5"))
    finally:
        server.close()
    one_line(proc, "text '", "U-Boot 2024.01 ready", "never a hilbench frame")


def test_a_silent_serial_port_names_the_baud_rate_and_the_option(tmp_path):
    pty = PtyPair()  # a port nothing answers on
    try:
        proc = hilbench(
            "run", "--board", pty.path, "--baud", "115200", *QUICK, "--trace", str(tmp_path / "t")
        )
    finally:
        pty.close()
    one_line(proc, "no answer", "it talks at 115,200 baud (--baud sets another speed)")
    assert not (tmp_path / "t").exists()  # nothing answered: no failed run left behind


@pytest.mark.parametrize(
    ("args", "needles", "absent"),
    [
        (["--trace", "/proc/x.h5"], ["cannot", "/proc/x.h5", "writable"], "no trace file"),
        (
            ["--model", "resnet18", "--dataset", "digits"],
            ["resnet18 takes colour images", "--dataset fashion-mnist-shift"],
            "calibration",
        ),
        (["--baud", "115200"], ["--baud sets a board's serial speed", "--board PORT"], ""),
        (["--run", "0001"], ["--run picks the run --resume continues"], ""),
    ],
)
def test_mistakes_point_the_right_way(args, needles, absent):
    line = one_line(hilbench("run", *args, *QUICK), *needles)
    assert not absent or absent not in line


# ---------------------------------------------------------------- naming the board once


def backend_of(path: Path) -> tuple[str, str | None]:
    trace = Trace.open(path)
    return trace.backend, trace.config.get("port")


def test_the_board_named_in_the_environment_or_pyproject_is_used(tmp_path):
    with emulator_on_tcp() as url:
        ok = hilbench(
            "run", *QUICK, "--trace", str(tmp_path / "env.h5"), env={"HILBENCH_BOARD": url}
        )
        assert ok.returncode == 0, ok.stderr
        assert backend_of(tmp_path / "env.h5") == ("board", url)
        assert f"connecting to {url} at 921,600 baud" in ok.stdout

        lab = tmp_path / "lab"
        lab.mkdir()
        (lab / "pyproject.toml").write_text(f'[tool.hilbench]\nboard = "{url}"\nbaud = 460800\n')
        ok = hilbench("run", *QUICK, "--trace", str(tmp_path / "file.h5"), cwd=lab)
        assert ok.returncode == 0, ok.stderr
        assert backend_of(tmp_path / "file.h5") == ("board", url)
        assert Trace.open(tmp_path / "file.h5").config["baud"] == 460_800

        # the command line wins
        ok = hilbench(
            "run", "--emulate", *QUICK, "--trace", str(tmp_path / "emu.h5"), cwd=lab,
            env={"HILBENCH_BOARD": url},
        )  # fmt: skip
        assert ok.returncode == 0, ok.stderr
        assert backend_of(tmp_path / "emu.h5") == ("emulate", None)


def test_a_blank_board_in_the_environment_never_runs_on_the_emulator(tmp_path):
    proc = hilbench("run", *QUICK, "--trace", str(tmp_path / "t.h5"), env={"HILBENCH_BOARD": ""})
    one_line(proc, "HILBENCH_BOARD is set but empty")
    assert not (tmp_path / "t.h5").exists()


# ---------------------------------------------------------------- what a user looks for


def test_the_header_and_the_trace_name_the_npu_backend_and_isa(tmp_path):
    from hilbench.npu import native
    from hilbench.npu.ops import backend as _backend

    proc = hilbench("run", *QUICK, "--trace", str(tmp_path / "a.h5"))
    assert proc.returncode == 0, proc.stderr
    name = _backend.name()
    isa = native.active_isa() if name == "native" else ""
    lines = proc.stdout.splitlines()
    more = [line for line in lines[1:3] if line.startswith("[hilbench]   ")][:1]  # wrapped at 80
    header = " ".join([lines[0], *(line.removeprefix("[hilbench]   ") for line in more)])
    assert header.endswith(f"· NPU {name} {isa}".rstrip()), header
    attrs = Trace.open(tmp_path / "a.h5").attrs
    assert (attrs["npu_backend"], attrs["npu_isa"]) == (name, isa)

    jit = hilbench(
        "run", *QUICK, "--trace", str(tmp_path / "b.h5"), env={"HILBENCH_NPU_BACKEND": "jit"}
    )
    assert jit.returncode == 0, jit.stderr
    assert jit.stdout.splitlines()[0].endswith("· NPU jit")
    attrs = Trace.open(tmp_path / "b.h5").attrs
    assert (attrs["npu_backend"], attrs["npu_isa"]) == ("jit", "")


def test_the_first_seconds_and_the_summary_say_what_happened(tmp_path):
    proc = hilbench(
        "run", *QUICK, "--link-faults", "drop=0.05,seed=3", "--trace", str(tmp_path / "t.h5")
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for phase in (
        "[hilbench] starting the emulator",
        "[hilbench] connected to hilbench-twin (firmware hilbench-twin",
        "[hilbench] uploading the model (",
        "[hilbench] uploading 1,438 training items (",
        "[hilbench] evaluating the initial weights",
    ):
        assert phase in out, out
    counts = Trace.open(tmp_path / "t.h5").event_counts()
    assert counts["injected"] > 0
    row = next(line for line in out.splitlines() if "│ events " in line)
    assert f"injected {counts['injected']}" in row


def test_emulate_logs_each_connection():
    proc = subprocess.Popen(
        [sys.executable, "-m", "hilbench", "emulate", "--listen", "127.0.0.1:0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip().rsplit(" ", 1)[-1]
        assert url.startswith("socket://"), url
        run = hilbench("run", "--board", url, *QUICK, "--trace", "/proc/x.h5")
        assert run.returncode == 2  # an unwritable trace: the connection still came and went
        time.sleep(0.5)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    lines = out.splitlines()
    stamp = r"hilbench emulate: \d\d:\d\d:\d\d "
    assert re.fullmatch(stamp + r"connection from 127\.0\.0\.1:\d+", lines[0]), lines
    assert re.fullmatch(
        stamp + r"127\.0\.0\.1:\d+ disconnected after [\d.]+ s and "
        r"\d+ frames \(the host closed it\)",
        lines[1],
    ), lines


def test_run_help_describes_every_option_and_lists_the_choices():
    from hilbench.cli import build_parser
    from hilbench.config import INITS, PERTURBATIONS

    parser = build_parser()
    run = next(a for a in parser._actions if a.dest == "command").choices["run"]
    for action in run._actions:
        assert action.help and len(action.help) > 10, action.option_strings
    text = run.format_help()
    for choice in (*INITS, *PERTURBATIONS, "two-point", "one-sided", "q16", "int16", "int8"):
        assert choice in text
    for word in ("mlp", "cnn", "digits-rot20", "HILBENCH_BOARD", "[tool.hilbench]", "--resume"):
        assert word in text


def test_version_names_the_git_commit():
    proc = hilbench("--version")
    assert proc.returncode == 0
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert re.fullmatch(
        rf"hilbench {re.escape(__version__)} \(git {head[:12]}(, modified)?; protocol 1, "
        r"trace format \d+\)",
        proc.stdout.strip(),
    ), proc.stdout


def test_the_design_and_a_changelog_live_in_the_repository():
    readme = (ROOT / "README.md").read_text()
    assert "../shared" not in readme and "docs/design.md" in readme
    design = (ROOT / "docs" / "design.md").read_text()
    invariants = re.findall(r"^\d\. \*\*([A-Z][a-z -]+)\.\*\*", design, re.M)
    assert invariants == [
        "Bit-exact",
        "Replayable",
        "At most once",
        "Nothing lost",
        "Clear failures",
        "Honest timing",
    ]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {__version__} " in changelog and "## Unreleased" in changelog
