"""fixtures/golden/zo_vectors.json is current: its vectors equal what the code computes."""

import importlib.util
import json
from pathlib import Path

import numpy as np

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
