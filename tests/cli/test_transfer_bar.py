"""The progress of a transfer where there is no run view (hilbench load, hilbench infer): on
stderr, a line when a transfer begins and then one every few seconds when it is not a terminal;
and `hilbench infer` on the SIL firmware says what it uploads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from hilbench.cli.progress import TransferBar
from hilbench.client.events import Transfer

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_piped_a_line_to_begin_then_one_a_period(capsys):
    clock = Clock()
    with TransferBar(period=2.0, clock=clock) as bar:
        model = bar.to("uploading the model")
        for done in range(0, 50_001, 1_000):  # 5 s at 10 kB/s
            clock.t = done / 10_000
            model(Transfer(done, 50_000))
        inputs = bar.to("uploading the inputs")
        for _blob in range(3):  # three blobs of one kind: one line to begin
            for done in (0, 500, 1000):
                inputs(Transfer(done, 1000))
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "uploading the model (48.8 KiB)",
        "uploading the model: 19.5 KiB of 48.8 KiB (40%), 9.8 KiB/s, 3 s left",
        "uploading the model: 39.1 KiB of 48.8 KiB (80%), 9.8 KiB/s, 1 s left",
        "uploading the inputs (1,000 B)",
    ]


def test_infer_on_the_sil_firmware_says_what_it_uploads(tmp_path):
    from hilbench.config import RunConfig
    from hilbench.npu.tflite import export_tflite
    from hilbench.train import prepare

    config = RunConfig()
    graph = prepare.build_graph(config, prepare.load_data(config))
    (tmp_path / "m.tflite").write_bytes(export_tflite(graph))
    np.save(tmp_path / "x.npy", np.zeros((3, *graph.input_shape), np.int8))
    done = subprocess.run(
        [sys.executable, "-m", "hilbench", "infer", str(tmp_path / "m.tflite"), "-i",
         str(tmp_path / "x.npy"), "--sil"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    err = done.stderr.splitlines()
    assert err[0].startswith("uploading the model (") and err[0].endswith(" KiB)")
    assert err[1].startswith("uploading the inputs (") and err[1].endswith(" B)")
    assert len(done.stdout.splitlines()) == 3
