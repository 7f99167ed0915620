"""The device-side blob parser (hilbench/device/blobcheck.py): it accepts every blob the host
builds, refuses every malformed case with the rule it breaks, checks the rules in the order of
docs/model-blob.md, never fails with anything but BlobError, and hands the twin a graph that
computes what the host's does. That the C parser (device_fw/core/blob.c) sends the same bytes
is device_fw/tests/test_blob.c's job, on the vectors tests/npu/test_nn_vectors.py keeps
current."""

from __future__ import annotations

import importlib.util
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hilbench.device import blob as blobcheck
from hilbench.device import plan
from hilbench.errors import ModelError
from hilbench.npu import zoo
from hilbench.npu.blob import from_blob, to_blob

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"


def load_generator():
    """fixtures/golden/make_nn_vectors.py as a module (registered: it defines dataclasses)."""
    name = "make_nn_vectors"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, GOLDEN / "make_nn_vectors.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


gen = load_generator()

ZOO = [
    ("mlp", {}),
    ("cnn", {}),
    ("mobilenet_v2", {}),
    ("mobilenet_v2", {"alpha": 0.5, "resolution": 40, "classes": 7}),
    ("resnet18", {}),
]


@pytest.mark.parametrize(("name", "kw"), ZOO, ids=[f"{n}-{i}" for i, (n, _) in enumerate(ZOO)])
def test_accepts_every_zoo_blob(name, kw):
    g = zoo.build(name, seed=2, **kw)
    sections = {"LOSS": b"\x01\x02\x03", "ZOCF": b""}
    blob = to_blob(g, sections)
    twin, secs = blobcheck.parse(blob)
    assert secs == sections
    assert len(twin.tensors) == len(g.tensors) and len(twin.ops) == len(g.ops)
    assert [t.shape for t in twin.tensors.values()] == [t.shape for t in g.tensors.values()]
    assert [o.kind for o in twin.ops] == [o.kind for o in g.ops]
    assert plan.act_bytes(twin) == plan.act_bytes(g)
    x = np.random.default_rng(0).integers(-128, 128, (3, *g.input_shape)).astype(np.int8)
    np.testing.assert_array_equal(twin.run(x), g.run(x))
    # the twin's graph holds the blob's integer params, as the host's reader does
    host, _ = from_blob(blob)
    for a, b in zip(twin.ops, host.ops, strict=True):
        assert a.params.keys() == b.params.keys()
        for k in a.params:
            np.testing.assert_array_equal(a.params[k], b.params[k])


def test_tensors_are_named_by_index():
    g = zoo.build("mlp", seed=1)
    twin, _ = blobcheck.parse(to_blob(g))
    assert list(twin.tensors) == [blobcheck.tensor_name(i) for i in range(len(g.tensors))]
    assert twin.input == blobcheck.tensor_name(list(g.tensors).index(g.input))


CASES = gen.malformed_cases()


@pytest.mark.parametrize(("label", "key", "blob"), CASES, ids=[c[0] for c in CASES])
def test_refuses_each_malformed_case(label, key, blob):
    with pytest.raises(blobcheck.BlobError) as e:
        blobcheck.parse(blob)
    assert e.value.key == key, e.value.message
    assert isinstance(e.value, ModelError)
    assert e.value.message == blobcheck.MESSAGES[key] % e.value.args_
    assert str(e.value) == e.value.message
    assert len(e.value.message.encode()) <= 256


def test_every_rule_has_a_case():
    keys = {key for _, key, _ in CASES}
    assert keys == set(blobcheck.MESSAGES), set(blobcheck.MESSAGES) ^ keys


def test_messages_are_device_templates():
    """Only %d %x %s (with zero-padded widths) and %%, no tensor names: the C formats them."""
    import re

    spec = re.compile(r"%(0\d+)?[dxs]|%%")
    for table in (blobcheck.MESSAGES, blobcheck.WHAT):
        for key, text in table.items():
            rest = spec.sub("", text)
            assert "%" not in rest, (key, text)
            assert text.isascii(), key


def _reseal(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


def test_the_first_broken_rule_wins():
    """Two broken rules: the one a device checks first is reported (the table's order)."""
    base = gen.raw_from_graph(gen._base_graphs()["fc"])
    r = base.copy()
    r.ops[0].opcode = 99  # pass 1, op record
    r.tensors[2].dtype = 7  # pass 1, tensor record: read before the ops
    with pytest.raises(blobcheck.BlobError) as e:
        blobcheck.parse(r.blob())
    assert e.value.key == "dtype"
    r = base.copy()
    r.output = 1  # pass 2: graph output never computed
    r.ops[0].reserved = 3  # pass 1
    with pytest.raises(blobcheck.BlobError) as e:
        blobcheck.parse(r.blob())
    assert e.value.key == "op_reserved"
    r = base.copy()
    r.tail = b"\0" * 4  # pass 1, the end
    r.tensors[0].dtype = 1  # pass 2, graph input
    with pytest.raises(blobcheck.BlobError) as e:
        blobcheck.parse(r.blob())
    assert e.value.key == "trailing"


def test_floats_zero_points_and_names_are_the_hosts_business():
    """A device ignores scale values, zero point values and names (decisions 9): a blob whose
    scales are NaN, whose zero points are off and whose names repeat loads on a device and
    runs with its integer params; the host's reader refuses it."""
    g = zoo.build("cnn", seed=5)
    r = gen.raw_from_graph(g)
    for t in r.tensors:
        t.scales = struct.pack(f"<{t.n_q}f", *([float("nan")] * t.n_q))
        t.zps = struct.pack(f"<{t.n_q}i", *([1000] * t.n_q))
        t.name = b"same"
    blob = r.blob()
    with pytest.raises(ModelError):
        from_blob(blob)
    twin, _ = blobcheck.parse(blob)
    x = np.random.default_rng(1).integers(-128, 128, (2, 8, 8, 1)).astype(np.int8)
    np.testing.assert_array_equal(twin.run(x), g.run(x))


def test_requantization_params_are_not_rederived():
    """Integer params in range but not what the scales give: a device runs them as sent."""
    g = zoo.build("mlp", seed=5, sizes=(8, 6, 4))
    blob = to_blob(g)
    p = dict(g.ops[1].params)
    p["multiplier"] = np.full_like(p["multiplier"], 1 << 30)
    p["shift"] = np.full_like(p["shift"], -3)
    r = gen.raw_from_graph(g)
    r.ops[1].params = blobcheck.RECORDS["FULLY_CONNECTED"].pack(p)
    bad = r.blob()
    assert bad != blob
    with pytest.raises(ModelError):
        from_blob(bad)
    twin, _ = blobcheck.parse(bad)
    np.testing.assert_array_equal(twin.ops[1].params["multiplier"], p["multiplier"])
    x = np.random.default_rng(2).integers(-128, 128, (4, 8)).astype(np.int8)
    assert twin.run(x).shape == (4, 4)


SMALL = [to_blob(g) for g in gen._base_graphs().values()]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, len(SMALL) - 1),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.binary(min_size=1, max_size=4)), max_size=3),
    cut=st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_never_fails_with_anything_but_blob_error(which, edits, cut):
    """Corrupted blobs (CRC made valid, so the deep checks run) are parsed or refused with a
    BlobError, never an IndexError, struct.error or numpy error."""
    body = bytearray(SMALL[which][:-4])
    for at, new in edits:
        at %= len(body)
        body[at : at + len(new)] = new
    if cut is not None:
        body = body[: 4 * ((cut % len(body)) // 4)]
    blob = _reseal(bytes(body))
    try:
        twin, _ = blobcheck.parse(blob)
    except blobcheck.BlobError:
        return
    x = np.zeros((1, *twin.input_shape), np.int8)
    assert twin.run(x).shape[0] == 1


def test_limits_cover_the_zoo_at_any_width():
    """The device tables hold MobileNetV2 and ResNet18 whatever their width or resolution."""
    for name, kw in (
        ("mobilenet_v2", {"alpha": 1.0, "resolution": 32}),
        ("resnet18", {"width": 1.0, "resolution": 32}),
    ):
        g = zoo.build(name, seed=0, **kw)
        assert len(g.tensors) <= blobcheck.MAX_TENSORS and len(g.ops) <= blobcheck.MAX_OPS
        twin, _ = blobcheck.parse(to_blob(g))
        assert len(twin.tensors) == len(g.tensors)


def test_the_doc_lists_every_rule():
    """docs/model-blob.md's table carries every template verbatim, in the parser's order."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "model-blob.md").read_text()
    section = doc[doc.index("## What a device checks") : doc.index("## What only the host checks")]
    where = {}
    for key, text in blobcheck.MESSAGES.items():
        quoted = "`" + text.replace("|", "\\|") + "`"
        assert quoted in section, f"{key}: {text!r} is not in docs/model-blob.md"
        where[key] = section.index(quoted)
    for text in blobcheck.WHAT.values():
        assert f"`{text}`" in section, text
    # the tables list the structure and graph rules in the order the parser applies them
    order = [k for k in blobcheck.MESSAGES if k not in ("truncated", "padding")]
    graph = order.index("graph_input")
    for part in (order[:graph], ["graph_input", "not_ready", "out_const", "shared", "output"]):
        assert [where[k] for k in part] == sorted(where[k] for k in part), part
