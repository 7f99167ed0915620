"""A real labgrid farm on loopback for the farm's tests: one coordinator, two exporters, four
places (two SIL programs loaded on acquire, two twins already running), started once per
module and stopped after it (hilbench.farm.lab.LocalFarm)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.needs import need_module

if TYPE_CHECKING:
    from hilbench.farm.lab import LocalFarm


@pytest.fixture(scope="module")  # stopped after the module, not at the suite's end
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFarm]:
    need_module("labgrid", "pip install -e '.[farm]' (the dev extra includes it)")
    from hilbench.farm.lab import LocalFarm

    farm = LocalFarm.simple(tmp_path_factory.mktemp("farm"), sil=2, twin=2, exporters=2)
    with farm:
        yield farm
    for what, proc in farm.procs:  # stop() waited for every one of them
        assert proc.poll() is not None, what


@pytest.fixture
def coordinator(lab: LocalFarm, monkeypatch: pytest.MonkeyPatch) -> str:
    """LG_COORDINATOR set to the lab's coordinator; the places are free before and after."""
    monkeypatch.setenv("LG_COORDINATOR", lab.address)
    wait_all_free(lab.address)
    yield lab.address
    wait_all_free(lab.address)


def held(address: str) -> dict[str, str]:
    """{place: holder} of the held places."""
    from hilbench.farm.client import FarmClient

    with FarmClient(address) as client:
        client.sync()
        return {n: p.acquired for n, p in client.places.items() if p.acquired}


def wait_all_free(address: str, timeout: float = 20.0) -> float:
    """Seconds until no place is held (fails the test after ``timeout``)."""
    start = time.monotonic()
    while True:
        now = held(address)
        if not now:
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            pytest.fail(f"places still held after {timeout:.0f} s: {now}")
        time.sleep(0.1)
