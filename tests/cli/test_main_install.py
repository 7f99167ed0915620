"""Issue 26 item 13: after the README's plain ``pip install -e .``, the main install's commands
work. ``hilbench run``, ``export`` and ``infer`` run here with every import of a package that
is not a main dependency (nor one of theirs) refused, as it would be in a fresh venv."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

# Runs the CLI with a meta-path finder that refuses the top-level modules of every installed
# distribution outside the main dependencies' closure (their own requirements, no extras).
RUNNER = textwrap.dedent(
    """
    import importlib.metadata as md, re, sys, tomllib
    main = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
    name = lambda req: re.split(r"[\\s<>=!~;\\[(]", req.strip(), maxsplit=1)[0].lower()
    allowed, todo = set(), [name(r) for r in main]
    while todo:
        dist = todo.pop().replace("_", "-")
        if dist in allowed:
            continue
        allowed.add(dist)
        try:
            reqs = md.requires(dist) or []
        except md.PackageNotFoundError:
            continue
        todo += [name(r) for r in reqs if "extra ==" not in r]
    blocked = {
        top for top, dists in md.packages_distributions().items()
        if top != "hilbench" and not any(d.lower().replace("_", "-") in allowed for d in dists)
    }
    class Refuse:
        def find_spec(self, fullname, path=None, target=None):
            if fullname.partition(".")[0] in blocked:
                raise ImportError(f"{fullname} is not installed by pip install -e .")
    sys.meta_path.insert(0, Refuse())
    from hilbench.cli import main as cli
    sys.exit(cli(sys.argv[2:]))
    """
)


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", RUNNER, str(ROOT / "pyproject.toml"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


def test_the_dev_extra_is_not_needed_by_run_export_infer(tmp_path):
    r = run(tmp_path, "run", "--budget", "200", "--no-live", "--trace", "run.h5")
    assert r.returncode == 0, r.stderr
    r = run(tmp_path, "export", "run.h5", "-o", "m.tflite")
    assert r.returncode == 0, r.stderr + r.stdout
    assert (tmp_path / "m.tflite").stat().st_size > 1000
    np.save(tmp_path / "x.npy", np.zeros((3, 64), np.int8))
    r = run(tmp_path, "infer", "m.tflite", "-i", "x.npy", "-o", "y.npy")
    assert r.returncode == 0, r.stderr + r.stdout
    assert np.load(tmp_path / "y.npy").shape[0] == 3
    assert "[dev]" not in r.stderr + r.stdout


def test_the_blocker_refuses_what_only_dev_installs(tmp_path):
    """The check above can fail: ruff (dev only) is refused by the same runner."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not any(d.startswith(("ruff", "mutmut", "labgrid", "ai-edge-litert")) for d in deps)
    code = RUNNER.replace("from hilbench.cli import main as cli", "import ruff  # noqa")
    r = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode != 0 and "ruff is not installed by pip install -e ." in r.stderr


def test_messages_say_what_tflite_micro_is():
    from hilbench.npu import tflite

    assert "oracle" not in tflite._INSTALL and "[dev]" not in tflite._INSTALL
    assert "TFLite Micro" in tflite._INSTALL
