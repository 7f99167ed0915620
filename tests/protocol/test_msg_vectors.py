"""fixtures/golden/msg_cases.hbgv is current: it equals what make_msg_vectors.py builds from
hilbench.protocol.spec now (device_fw/tests/test_msg.c replays it without Python)."""

import importlib.util
from pathlib import Path

import numpy as np

from hilbench import golden
from hilbench.protocol import spec

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"


def load_generator():
    mod_spec = importlib.util.spec_from_file_location(
        "make_msg_vectors", GOLDEN / "make_msg_vectors.py"
    )
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod


def test_vectors_are_current():
    fresh = golden.dumps(load_generator().build_hbgv())
    stored = (GOLDEN / "msg_cases.hbgv").read_bytes()
    assert fresh == stored, "run `python fixtures/golden/make_msg_vectors.py` and commit it"


def test_vectors_cover_every_request_type_and_outcome():
    a = golden.read(GOLDEN / "msg_cases.hbgv")
    types, codes = a["req_type"], a["req_code"]
    assert len(types) >= 2000
    for t in spec.REQUEST_LAYOUTS:
        got = set(codes[types == t].tolist())
        assert {0, spec.ErrorCode.BAD_LENGTH} <= got, (t, got)
        if any(
            isinstance(it, spec.Rule) or (isinstance(it, spec.Scalar) and it.ranged)
            for it in spec.REQUEST_LAYOUTS[t].items
        ):
            assert spec.ErrorCode.BAD_ARGUMENT in got, (t, got)
    assert spec.ErrorCode.UNKNOWN_TYPE in set(codes.tolist())
    msgs = bytes(a["req_msg"]).decode()
    needles = ("steps[", "'seeds'", "trailing", "exceeds total_len", "exceed 2**32", "an input")
    for needle in needles:
        assert needle in msgs, needle
    # some formats are cut at 256 bytes on a character boundary
    out_len = np.diff(a["fmt_out_off"])
    assert out_len.max() <= spec.MAX_ERROR_MSG and (out_len >= spec.MAX_ERROR_MSG - 3).any()
    assert set(a["data_code"].tolist()) == {0, spec.ErrorCode.BAD_ARGUMENT}
