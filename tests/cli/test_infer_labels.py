"""``hilbench infer --labels`` and ``hilbench validate`` on the SIL and QEMU firmware with the
held-out conformance models a device used to refuse (an output larger than a frame, an input
larger than a data slot's item), end to end in a subprocess."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hilbench.npu.tflite import export_tflite
from tests.cli_helpers import hilbench
from tests.npu.conformance import held_out_models
from tests.npu.test_conformance import tflm

MODELS = {name: (g, x) for name, g, x in held_out_models()}


def _files(tmp_path, name):
    g, x = MODELS[name]
    model = tmp_path / f"{name}.tflite"
    model.write_bytes(export_tflite(g, 1))
    np.save(tmp_path / "x.npy", x)
    want = tflm(g, x)
    labels = (np.arange(len(x)) * 7) % want.shape[1]
    labels[0] = int(np.argmax(want[0]))  # at least one right, so the count can be checked
    np.save(tmp_path / "labels.npy", labels.astype(np.int64))
    return model, x, want, labels


def test_infer_on_the_sil_reads_a_large_output_and_prints_accuracy(tmp_path):
    model, x, want, labels = _files(tmp_path, "big_output")
    r = hilbench(
        "infer", str(model), "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy"),
        "--labels", str(tmp_path / "labels.npy"), "--sil",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "y.npy")
    np.testing.assert_array_equal(y.reshape(len(x), -1), want)  # 6,144 elements each
    hits = int(np.sum(np.argmax(want, 1) == labels))
    assert hits >= 1
    assert f"accuracy against labels.npy: {hits}/{len(x)} = {hits / len(x):.4f} (top-1)" in (
        r.stdout
    )


def test_infer_labels_go_to_stderr_without_output_and_bad_labels_exit_2(tmp_path):
    model, x, want, labels = _files(tmp_path, "cnn-27")
    r = hilbench(
        "infer", str(model), "--input", str(tmp_path / "x.npy"),
        "--labels", str(tmp_path / "labels.npy"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip().splitlines()) == len(x)  # stdout: the outputs only
    hits = int(np.sum(np.argmax(want, 1) == labels))
    assert f"accuracy against labels.npy: {hits}/{len(x)}" in r.stderr
    np.save(tmp_path / "short.npy", labels[:-1])
    np.save(tmp_path / "float.npy", labels.astype(np.float32))
    for bad, says in (
        ("short.npy", f"holds labels of shape ({len(x) - 1},) for {len(x)} items"),
        ("float.npy", f"holds float32, expected integer labels of shape ({len(x)},)"),
    ):
        r = hilbench(
            "infer", str(model), "--input", str(tmp_path / "x.npy"),
            "--labels", str(tmp_path / bad),
        )  # fmt: skip
        assert r.returncode == 2 and says in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("backend", ["--sil", "--qemu"])
def test_validate_on_a_device_with_a_large_input(tmp_path, backend):
    """76,800-byte inputs (in 19 INFER pieces each), 4,800-element outputs (in 2 parts)."""
    model, x, want, labels = _files(tmp_path, "big_input")
    r = hilbench(
        "validate", str(model), "--input", str(tmp_path / "x.npy"),
        "--labels", str(tmp_path / "labels.npy"), backend, "--json",
        timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["items"], d["outputs"], d["byte_equal"], d["passed"]) == (len(x), 4800, len(x), True)
    hits = float(np.mean(np.argmax(want, 1) == labels))
    assert d["accuracy"] == {"device": hits, "reference": hits}
