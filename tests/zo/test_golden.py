"""fixtures/golden/zo_vectors.json and zo.hbgv are current: their vectors equal what the code
computes (device_fw/tests/test_zo.c reads zo.hbgv without Python)."""

import importlib.util
import json
from pathlib import Path

import numpy as np

from hilbench import golden
from hilbench.zo import loss, perturb, rng

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"


def load_generator():
    spec = importlib.util.spec_from_file_location("make_zo_vectors", GOLDEN / "make_zo_vectors.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_golden_file_is_current():
    """Every section equals what the code computes now; the end-to-end ``device`` vectors are
    recomputed from their *stored* model blobs (so a change of the zoo's init does not matter)."""
    gen = load_generator()
    stored = json.loads((GOLDEN / "zo_vectors.json").read_text())
    fresh = json.loads(json.dumps(gen.build()))
    fix = "run `python fixtures/golden/make_zo_vectors.py` after a spec change"
    for key in stored:
        if key not in ("device", "zocf"):
            assert stored[key] == fresh[key], f"{key}: {fix}"
    for entry in stored["device"]:
        again = gen.device_entry(
            entry["zocf"], bytes.fromhex(entry["model_blob"]), bytes.fromhex(entry["data_blob"])
        )
        assert json.loads(json.dumps(again)) == entry, f"device {entry['zocf']}: {fix}"


def test_golden_vectors_hold_spec_facts():
    g = json.loads((GOLDEN / "zo_vectors.json").read_text())
    assert g["philox"][0]["output"] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    rad = next(s for s in g["samples"] if s["distribution"] == "rademacher")
    d2 = next(d for d in rad["fixed"]["deltas"] if d["eps"] == 2 and d["unit_shift"] == 0)
    np.testing.assert_array_equal(np.array(d2["delta"]), 2 * np.array(rad["samples"]))
    p = g["pool"]
    for k, offs in enumerate(p["offsets"]):
        for j, o in enumerate(offs):
            want = [p["values"][(o + i) % p["pool_size"]] for i in range(p["shape"][1])]
            assert p["samples"][k][j] == want
    tables = loss.LossTables.from_bytes(bytes.fromhex(g["loss"]["loss_section"]))
    logits = np.array(g["loss"]["logits"], dtype=np.int8)
    labels = np.array(g["loss"]["labels"], dtype=np.uint8)
    assert loss.per_sample_q16(logits, labels, tables).tolist() == g["loss"]["per_item_q16"]
    s = g["streams"][1]
    assert rng.stream_words(s["seed"], s["stream"], s["tensor"], 12).tolist() == s["words"]
    assert perturb.FIXED_SCALE[perturb.UNIFORM] == 887


def test_hbgv_file_is_current():
    """zo.hbgv holds exactly what build_hbgv() computes now (byte for byte)."""
    gen = load_generator()
    fresh = golden.dumps(gen.build_hbgv())
    stored = (GOLDEN / "zo.hbgv").read_bytes()
    assert stored == fresh, "zo.hbgv is stale: run `python fixtures/golden/make_zo_vectors.py`"


def test_hbgv_vectors_hold_spec_facts():
    """A few facts of docs/zo-math.md read back from the C test's file: the Philox KAT, a
    depthwise pool case (rows along the last axis), a bias with a row per element, and the
    refusal texts as the registry formats them."""
    g = golden.read(GOLDEN / "zo.hbgv")
    assert g["philox.out"][0].tolist() == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    gen = load_generator()
    for i, case in enumerate(gen.PERTURB_CASES):
        shape, layout, pool = case[2], case[3], case[6]
        if pool and layout == perturb.ROWS_TRAILING:
            r, off = g[f"p{i}.r"], g[f"p{i}.offsets"]
            rows = shape[-1]
            values, size = g[f"p{i}.pool"], pool[1]
            for k in range(len(r)):
                for e in range(r.shape[1]):
                    j, pos = e % rows, e // rows
                    assert r[k, e] == values[(off[k, j] + pos) % size]
    msgs = {bytes(v).decode() for k, v in g.items() if k.endswith(".msg")}
    pool_row = "ZOCF pool of 8 is shorter than a row of tensor 4 (9 elements), so the row would"
    assert pool_row + " repeat at a fixed distance" in msgs
    assert "LOSS section: EXP[0] is 65535, must be 65536" in msgs
