"""The golden vectors the C firmware's graph tests read (fixtures/golden/nn_*.hbgv, written by
fixtures/golden/make_nn_vectors.py) are current: regenerated in memory they are byte for byte
the committed files. So the C tests (device_fw/tests/test_nn.c, test_graph.c, test_blob.c)
always check the C against today's TFLM outputs, hilbench.device.blob's messages and
hilbench.device.plan's sizes."""

from __future__ import annotations

import pytest

from hilbench import golden
from hilbench.device import blob as blobcheck
from hilbench.npu import registry
from tests.needs import need_module

from .test_blobcheck import load_generator

need_module("tflite_micro.python.tflite_micro.runtime")

gen = load_generator()
FIX = "run `python fixtures/golden/make_nn_vectors.py` and commit fixtures/golden/nn_*.hbgv"


@pytest.fixture(scope="module")
def built():
    return gen.build()


@pytest.mark.parametrize(
    "path", [gen.OPS_PATH, gen.MODELS_PATH, gen.BLOBS_PATH], ids=lambda p: p.name
)
def test_committed_vectors_are_current(built, path):
    assert path.exists(), f"{path.name} is missing: {FIX}"
    assert path.read_bytes() == golden.dumps(built[path]), f"{path.name} is stale: {FIX}"


def test_vectors_cover_every_op_and_rule():
    data = golden.read(gen.OPS_PATH)
    kinds = set()
    for i in range(int(data["n_cases"][0])):
        graph, _ = blobcheck.parse(data[f"c{i}.blob"].tobytes())
        kinds |= {o.kind for o in graph.ops}
    assert kinds == set(registry.REGISTRY)
    blobs = golden.read(gen.BLOBS_PATH)
    keys = {blobs[f"b{i}.key"].tobytes().decode() for i in range(int(blobs["n_cases"][0]))}
    assert keys == set(blobcheck.MESSAGES)
    verdicts = [blobs[f"r{i}.msg"].size for i in range(int(blobs["n_mutations"][0]))]
    assert 0 < verdicts.count(0) < len(verdicts)  # corrupted blobs both accepted and refused
    models = golden.read(gen.MODELS_PATH)
    names = [models[f"m{j}.name"].tobytes().decode() for j in range(int(models["n_models"][0]))]
    assert names == ["cnn", "mobilenet_v2", "resnet18"]
