"""A whole labgrid farm on loopback: a coordinator, exporters, and devices behind them.

For the tests, the benchmark and trying the farm without boards::

    python -m hilbench.farm.lab DIR --sil 2 --twin 2   # prints LG_COORDINATOR=..., Ctrl-C ends it

Each place has one ``NetworkSerialPort`` (raw TCP on 127.0.0.1) and one ``HilbenchDevice``:
a ``sil`` place's firmware is the SIL program, started when a client loads the place (its
loader) and stopped when it releases it; a ``twin`` place's device is a ``hilbench emulate
--listen`` twin started with the farm (kind ``none``: nothing to load, like a board flashed
by someone else); a ``given`` place's device is the caller's, at ``port``, with the
``HilbenchDevice`` settings ``device`` (e.g. QEMU halted behind its GDB stub, kind
``pyocd``). Places are spread over ``exporters`` exporters (exp0, exp1, ...), tagged
``board=sil`` or ``board=twin`` plus ``farm=lab``. Every process the farm starts dies with
the process that started it (PR_SET_PDEATHSIG) and is stopped by ``stop()``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hilbench.errors import HilbenchError

PR_SET_PDEATHSIG = 1
START_TIMEOUT_S = 30.0


@dataclass
class LabPlace:
    name: str
    kind: str  # "sil", "twin", or "given" (a device the caller runs at ``port``)
    exporter: int = 0
    tags: dict[str, str] = field(default_factory=dict)
    port: int = 0  # the device's TCP port on 127.0.0.1
    device: dict[str, str] = field(default_factory=dict)  # a "given" place's HilbenchDevice


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _tool(name: str, module: str) -> list[str]:
    path = shutil.which(name)
    return [path] if path else [sys.executable, "-m", module]


class LocalFarm:
    """Start with ``start()`` (or as a context manager); ``address`` is the coordinator's."""

    def __init__(
        self,
        root: str | Path,
        places: list[LabPlace],
        *,
        exporters: int = 1,
        sil_options: str = "",
    ) -> None:
        self.root = Path(root)
        self.places = places
        self.exporters = max(1, exporters)
        self.sil_options = sil_options
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    @classmethod
    def simple(cls, root: str | Path, sil: int = 2, twin: int = 2, exporters: int = 2) -> LocalFarm:
        """``sil`` SIL places (sil-0, ...) and ``twin`` twin places, round-robin on exporters."""
        places = [LabPlace(f"sil-{i}", "sil") for i in range(sil)]
        places += [LabPlace(f"twin-{i}", "twin") for i in range(twin)]
        for i, place in enumerate(places):
            place.exporter = i % max(1, exporters)
        return cls(root, places, exporters=exporters)

    # ---------------------------------------------------------------- processes

    def _spawn(self, what: str, argv: list[str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
        out = open(log, "wb")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        finally:
            out.close()
        self.procs.append((what, proc))
        return proc

    def _start_twin(self, place: LabPlace) -> None:
        log = self.root / f"{place.name}.log"
        argv = [sys.executable, "-m", "hilbench", "emulate", "--listen", "127.0.0.1:0"]
        proc = self._spawn(f"twin {place.name}", argv, self.root, log)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            if "socket://" in text:
                place.port = int(text.split("socket://", 1)[1].split()[0].rsplit(":", 1)[1])
                return
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        raise HilbenchError(
            f"the twin of lab place {place.name} did not start: {log.read_text()[-500:]!r}",
            "run `hilbench emulate --listen 127.0.0.1:0` by hand to see why",
        )

    def start(self) -> LocalFarm:
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        coordinator_dir = self.root / "coordinator"
        coordinator_dir.mkdir(exist_ok=True)
        places_yaml = {}
        for place in self.places:
            tags = {"board": place.kind, "farm": "lab", **place.tags}
            places_yaml[place.name] = {
                "aliases": [],
                "comment": f"hilbench lab: {place.kind}",
                "tags": tags,
                "matches": [
                    {"exporter": "*", "group": place.name, "cls": "*", "name": None, "rename": None}
                ],
            }
        (coordinator_dir / "places.yaml").write_text(yaml.safe_dump(places_yaml))
        self._spawn(
            "labgrid-coordinator",
            [*_tool("labgrid-coordinator", "labgrid.remote.coordinator"), "-l", self.address],
            coordinator_dir,
            self.root / "coordinator.log",
        )
        # an exporter that finds no coordinator exits (status 100): start them once it listens
        self._wait_until(self._coordinator_listens, "the coordinator does not listen yet")
        for place in self.places:
            if place.kind == "twin":
                self._start_twin(place)
            elif place.kind == "sil":
                place.port = free_port()
            elif place.kind != "given" or not place.port:
                raise HilbenchError(
                    f"lab place kind {place.kind!r}", "use sil, twin, or given with its port"
                )
        for index in range(self.exporters):
            groups = {}
            for place in (p for p in self.places if p.exporter == index):
                device = {
                    "kind": "sil" if place.kind == "sil" else "none",
                    "probe": f"LAB{place.name}",
                }
                if place.kind == "sil":
                    device["device_id"] = place.name
                    if self.sil_options:
                        device["options"] = self.sil_options
                if place.kind == "given":
                    device = dict(place.device)
                groups[place.name] = {
                    "NetworkSerialPort": {
                        "host": "127.0.0.1",
                        "port": place.port,
                        "protocol": "raw",
                        "speed": 921600,
                    },
                    "HilbenchDevice": device,
                }
            config = self.root / f"exporter{index}.yaml"
            config.write_text(yaml.safe_dump(groups))
            self._spawn(
                f"exporter exp{index}",
                [
                    *_tool("labgrid-exporter", "labgrid.remote.exporter"),
                    "-c",
                    self.address,
                    "-n",
                    f"exp{index}",
                    str(config),
                ],
                self.root,
                self.root / f"exporter{index}.log",
            )
        self.wait_ready()

    def _coordinator_listens(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
        except OSError:
            return False
        return True

    def _check_alive(self) -> None:
        for what, proc in self.procs:
            if proc.poll() is not None:
                raise HilbenchError(f"lab {what} exited with {proc.returncode}", self._logs())

    def _wait_until(self, ready: Callable[[], bool], waiting: str) -> None:
        """Until ``ready()``, while every process lives (START_TIMEOUT_S at most)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            self._check_alive()
            if time.monotonic() > deadline:
                raise HilbenchError(
                    f"the lab farm did not come up in {START_TIMEOUT_S:.0f} s ({waiting})",
                    self._logs(),
                )
            time.sleep(0.1)

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until the coordinator answers and every place's resources are published."""
        from hilbench.farm.client import FarmClient

        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            self._check_alive()
            if not self._coordinator_listens():
                last = "the coordinator does not listen yet"
                time.sleep(0.1)
                continue
            try:
                with FarmClient(self.address) as client:
                    client.sync()
                    published = {
                        group
                        for groups in client.session.resources.values()
                        for group, entries in groups.items()
                        if len(entries) >= 2
                    }
                    missing = [p.name for p in self.places if p.name not in published]
                    if not missing and len(client.places) >= len(self.places):
                        return
                    last = f"not yet published: {', '.join(missing)}"
            except HilbenchError as exc:
                last = str(exc)
            time.sleep(0.2)
        raise HilbenchError(
            f"the lab farm did not come up in {timeout:.0f} s ({last})", self._logs()
        )

    def _logs(self) -> str:
        tails = []
        for log in sorted(self.root.glob("*.log")):
            text = log.read_text(errors="replace").strip().splitlines()[-3:]
            tails.append(f"{log.name}: {' | '.join(text)}")
        return "logs: " + "; ".join(tails)

    def stop(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
        for _, proc in reversed(self.procs):
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(5.0)
        self.procs.clear()

    def __enter__(self) -> LocalFarm:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        return {**os.environ, "LG_COORDINATOR": self.address}


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="a labgrid farm on loopback (docs/farm.md)")
    parser.add_argument("dir", help="where the coordinator, exporters and logs keep their files")
    parser.add_argument("--sil", type=int, default=2, help="SIL places (default 2)")
    parser.add_argument("--twin", type=int, default=2, help="twin places (default 2)")
    parser.add_argument("--exporters", type=int, default=2, help="exporters (default 2)")
    args = parser.parse_args(argv)
    try:
        with LocalFarm.simple(args.dir, args.sil, args.twin, args.exporters) as farm:
            names = ", ".join(p.name for p in farm.places)
            print(f"export LG_COORDINATOR={farm.address}  # places {names}; Ctrl-C ends it")
            sys.stdout.flush()
            while True:
                time.sleep(3600)
    except HilbenchError as exc:
        print(f"hilbench.farm.lab: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
