"""The host's client against the twin: model_crc32 is checked, INFER is spoken."""

import zlib

import numpy as np
import pytest
from devwire import data, model_blob

from hilbench.device import DeviceTwin
from hilbench.errors import DeviceError
from hilbench.protocol import messages as m
from hilbench.session import direct_target

GRAPH, BLOB = model_blob()


class LyingTwin(DeviceTwin):
    """Confirms every model with a CRC one bit off (a corrupted upload or a broken device)."""

    def _load_model(self, req):
        reply = super()._load_model(req)
        if reply.complete:
            return m.LoadModelResponse(reply.received, True, reply.model_crc32 ^ 1)
        return reply


def test_load_model_returns_the_blobs_crc_and_a_wrong_one_is_named():
    target = direct_target(DeviceTwin())
    assert target.load_model(BLOB) == zlib.crc32(BLOB[:-4]) == int.from_bytes(BLOB[-4:], "little")
    liar = direct_target(LyingTwin())
    good = zlib.crc32(BLOB[:-4])
    with pytest.raises(DeviceError) as err:
        liar.load_model(BLOB)
    assert f"{good ^ 1:#010x}" in str(err.value) and f"{good:#010x}" in str(err.value)


def test_infer_over_the_client_is_the_models_output():
    target = direct_target(DeviceTwin())
    target.load_model(BLOB)
    payload = data(n=6)
    target.load_data_blob(1, payload)
    x = np.frombuffer(payload, np.int8, 6 * 64, 8).reshape(6, 64)
    expected = GRAPH.run(x)
    for i in range(6):
        np.testing.assert_array_equal(target.infer(slot=1, index=i).output, expected[i])
        np.testing.assert_array_equal(target.infer(input=x[i]).output, expected[i])
    with pytest.raises(DeviceError, match="index 6 is past the end of data slot 1"):
        target.infer(slot=1, index=6)
    assert target.weights_crc()[1] == 0
