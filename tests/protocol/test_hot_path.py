"""The per-step payload builders must pack exactly what the message classes pack, and refuse
(None) whatever the message classes would refuse, so the classes can say why."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hilbench.protocol import messages as m

seeds_arrays = st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=40).map(
    lambda v: np.array(v, np.uint32)
)


@settings(max_examples=300, deadline=None)
@given(
    slot=st.integers(-2, 6),
    batch_size=st.integers(-1, 300),
    batch_seed=st.integers(-5, 2**32 + 5),
    eps=st.integers(-1, 130),
    seeds=seeds_arrays,
)
def test_probe_payload_matches_the_message(slot, batch_size, batch_seed, eps, seeds) -> None:
    fast = m.probe_payload(slot, batch_size, batch_seed, eps, seeds)
    try:
        packed = m.ProbeRequest(slot, batch_size, batch_seed, eps, seeds).pack()
    except m.MessageError:
        assert fast is None
    else:
        assert fast == packed


@pytest.mark.parametrize(
    "seeds",
    [
        np.zeros(0, np.uint32),  # q = 0
        np.zeros(m.MAX_Q + 1, np.uint32),  # q past MAX_Q
        np.zeros((2, 2), np.uint32),  # not 1-D
        np.zeros(3, np.int64),  # another dtype: the message converts or refuses it
        [1.0, 2, 3],  # a list holding a float
        [-1, 2, 3],  # a list with a value uint32 cannot hold
        [1, 2**32],
        [],  # an empty list: q = 0
        (1, 2, 3),  # a tuple: not a list, not an array
    ],
)
def test_probe_payload_leaves_anything_unusual_to_the_message(seeds) -> None:
    assert m.probe_payload(0, 32, 7, 2, seeds) is None


def test_probe_payload_refuses_non_int_scalars() -> None:
    seeds = np.arange(4, dtype=np.uint32)
    assert m.probe_payload(np.uint8(0), 32, 7, 2, seeds) is None
    assert m.probe_payload(0, 32.0, 7, 2, seeds) is None
    assert m.probe_payload(0, 32, 7, True, seeds) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=0, max_size=600))
def test_apply_probed_payload_matches_the_message(values) -> None:
    coeffs = np.array(values, np.int32)
    fast = m.apply_probed_payload(coeffs)
    try:
        packed = m.ApplyProbedRequest(coeffs=coeffs).pack()
    except m.MessageError:
        assert fast is None
    else:
        assert fast == packed


#: what a caller may put in a list of seeds or coefficients: ints in and out of every range,
#: bools, floats (whole or not), numpy scalars
list_values = st.one_of(
    st.integers(-(2**33), 2**33),
    st.integers(0, 2**32 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.booleans(),
    st.floats(-10, 10),
    st.integers(0, 100).map(np.uint32),
    st.integers(-100, 100).map(np.int64),
)


@settings(max_examples=400, deadline=None)
@given(
    coeffs=st.lists(list_values, min_size=0, max_size=12),
    seeds=st.lists(list_values, min_size=0, max_size=12),
)
def test_list_payloads_match_the_message_or_are_left_to_it(coeffs, seeds) -> None:
    """Lists (the trainer's per-step values) pack to the message's bytes exactly when the
    message takes them; whatever it refuses, the builder leaves to it (None)."""
    _packs_as_the_message(coeffs, seeds)


@settings(max_examples=200, deadline=None)
@given(
    coeffs=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=12),
    seeds=st.lists(list_values, min_size=0, max_size=12),
)
def test_an_array_beside_a_list_packs_as_the_message(coeffs, seeds) -> None:
    """One argument an array, the other a list: the piecewise path, same bytes or None."""
    _packs_as_the_message(np.array(coeffs, np.int32), seeds)


def _packs_as_the_message(coeffs: object, seeds: object) -> None:
    """The APPLY_PROBE payload builder gives the message's bytes, or None where it refuses."""
    fast = m.apply_probe_payload(coeffs, 0, 32, 7, 2, seeds)
    try:
        packed = m.ApplyProbeRequest(coeffs, m.ProbeRequest(0, 32, 7, 2, seeds)).pack()
    except m.MessageError:
        assert fast is None
    else:
        assert fast == packed
