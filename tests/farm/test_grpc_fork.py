"""gRPC's fork support is off in every process that talks to a labgrid coordinator: with it
on, a subprocess whose child runs Python before exec (a preexec_fn, as hilbench's QEMU launch
and the Ctrl-C tests use) aborted with SIGABRT while the client's threads were inside gRPC
(seen in CI: "epoll_wait error: Bad file descriptor")."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.cli_helpers import ROOT
from tests.needs import need_module

PROBE = """
import os, sys
import hilbench.farm.client  # imports grpc, through hilbench.farm
assert "grpc" in sys.modules
print(os.environ.get("GRPC_ENABLE_FORK_SUPPORT"))
"""


def test_the_labgrid_client_imports_grpc_with_fork_support_off():
    need_module("labgrid", "pip install -e '.[farm]' (the dev extra includes it)")
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "false"
    # a setting the user made is kept
    env["GRPC_ENABLE_FORK_SUPPORT"] = "true"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert proc.stdout.strip() == "true", proc.stderr
